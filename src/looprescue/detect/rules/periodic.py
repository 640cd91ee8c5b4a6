"""Rules ``cycle`` and ``counter``: the tail of the stream is one unit repeated.

``cycle`` needs copies that are identical character for character; ``counter`` needs copies
that are identical once digits are masked (``Step 12: …`` / ``Step 13: …``), and because that
is less certain it needs more copies before it fires.

How it stays incremental: at every checkpoint the rule extends the runs it already tracks by
comparing only the new stride against the text one period earlier, and looks for new periods
by searching the last ``PROBE`` chars in the window behind them (``str.rfind``, done in C). A
run at lag p is the set of positions i with s[i] == s[i-p] up to now; its first position is
where the second copy begins, which is the prune point (the first copy is kept).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.text import excerpt

# Length of the suffix searched for in the window. Long enough that a chance match in prose is
# rare, short enough to be well under the shortest loop we must catch (600 chars).
PROBE = 24
# Lags tracked at once; more than a handful only happens in highly regular text (tables), where
# the longest runs are the interesting ones.
MAX_CANDIDATES = 8
# Older occurrences of the probe tried per checkpoint, to get past repeats inside one unit.
MAX_OCCURRENCES = 8
# Consecutive copies compared when judging whether a digit-masked run is a counter.
COUNTER_COPIES_CHECKED = 4
_NUMBER = re.compile(r"\d+")


@dataclass(slots=True)
class _Run:
    lag: int
    masked_from: int  # first position whose masked char equals the one `lag` earlier, to now
    exact_from: int  # same for raw chars (>= masked_from)


def _last_mismatch(a: str, b: str) -> int:
    """Index of the last position where equal-length ``a`` and ``b`` differ (-1 if none)."""
    for i in range(len(a) - 1, -1, -1):
        if a[i] != b[i]:
            return i
    return -1


def _run_length(text: str, end: int, lag: int, known: int, floor: int) -> int:
    """Longest L >= known with text[end-L:end] == text[end-L-lag:end-lag], looking no further
    back than ``floor`` (galloping search, so a long run costs O(L log L) once)."""
    limit = end - lag - floor
    lo = min(known, limit)
    hi = lo
    step = max(lo, PROBE)
    while True:
        trial = min(hi + step, limit)
        if trial <= hi or text[end - trial : end] != text[end - trial - lag : end - lag]:
            break
        hi = trial
        step *= 2
    lo = hi
    hi = min(hi + step, limit + 1)
    # invariant: lo matches, hi does not (or is past the limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if text[end - mid : end] == text[end - mid - lag : end - lag]:
            lo = mid
        else:
            hi = mid
    return lo


class PeriodicRule:
    """Tracks periodic runs of one channel and fires ``cycle`` or ``counter``."""

    def __init__(self, channel: Channel, cfg: DetectorConfig, code_fence_factor: float) -> None:
        self._channel = channel
        self._cfg = cfg
        self._fence_factor = code_fence_factor
        self._runs: dict[int, _Run] = {}
        self._last_checkpoint = 0
        # safe_offset's memory: the longest recurring suffix at the end of the last call
        self._suffix = 0
        self._suffix_end = 0
        self._suffix_lag = 0  # a lag at which that suffix recurs (0: none known)

    # -- checkpoint ---------------------------------------------------------------------------
    def at_checkpoint(self, win: TextWindow, cp: int, in_fence: bool) -> Hit | None:
        self._extend(win, cp)
        self._last_checkpoint = cp
        if not any(cp - r.masked_from >= r.lag for r in self._runs.values()):
            self._discover(win, cp)
        return self._evaluate(win, cp, in_fence)

    def _extend(self, win: TextWindow, cp: int) -> None:
        start = self._last_checkpoint
        if start >= cp or not self._runs:
            return
        raw, masked, base = win.raw, win.masked, win.base
        a, b = start - base, cp - base
        for lag in list(self._runs):
            run = self._runs[lag]
            if a - lag < 0:
                del self._runs[lag]
                continue
            new_m, old_m = masked[a:b], masked[a - lag : b - lag]
            if new_m != old_m:
                run.masked_from = max(run.masked_from, start + _last_mismatch(new_m, old_m) + 1)
            new_r, old_r = raw[a:b], raw[a - lag : b - lag]
            if new_r != old_r:
                run.exact_from = max(run.exact_from, start + _last_mismatch(new_r, old_r) + 1)
            run.exact_from = max(run.exact_from, run.masked_from)
            if cp - run.masked_from < PROBE:
                del self._runs[lag]

    def _discover(self, win: TextWindow, cp: int) -> None:
        cfg = self._cfg
        masked, raw, base = win.masked, win.raw, win.base
        b = cp - base
        if b < PROBE + cfg.cycleMinPeriod:
            return
        floor = max(0, cp - win.keep - base)  # the horizon: never depends on trimming
        lo = max(0, b - PROBE - cfg.cycleMaxPeriod)
        hi = b - cfg.cycleMinPeriod  # an occurrence must end at least one minimal period back
        for _ in range(MAX_OCCURRENCES):
            j = win.rfind_masked(b - PROBE, b, lo, hi)
            if j < 0:
                return
            hi = j + PROBE - 1
            lag = b - PROBE - j
            if lag in self._runs:
                continue
            m_len = _run_length(masked, b, lag, PROBE, floor)
            e_len = _run_length(raw, b, lag, 0, floor) if raw[b - 1] == raw[b - 1 - lag] else 0
            self._runs[lag] = _Run(lag, cp - m_len, cp - min(e_len, m_len))
            if len(self._runs) > MAX_CANDIDATES:
                weakest = min(self._runs.values(), key=lambda r: cp - r.masked_from)
                del self._runs[weakest.lag]
            if m_len >= 2 * lag:
                return  # a strong run: older occurrences are its multiples

    # -- firing -------------------------------------------------------------------------------
    def _evaluate(self, win: TextWindow, cp: int, in_fence: bool) -> Hit | None:
        cfg = self._cfg
        factor = self._fence_factor if in_fence else 1.0
        best: Hit | None = None
        for run in self._runs.values():
            lag = run.lag
            exact_chars = cp - run.exact_from + lag
            if (
                exact_chars >= cfg.cycleMinChars * factor
                and exact_chars >= cfg.cycleMinRepeats * lag
            ):
                hit = self._hit(win, "cycle", run.exact_from, lag, cp)
            else:
                masked_chars = cp - run.masked_from + lag
                if (
                    run.masked_from < run.exact_from
                    and masked_chars >= cfg.counterMinChars * factor
                    and masked_chars >= cfg.counterMinRepeats * lag
                    and self._counts_like_a_counter(win, cp, lag)
                ):
                    hit = self._hit(win, "counter", run.masked_from, lag, cp)
                else:
                    continue
            if best is None or hit.prune_offset < best.prune_offset:
                best = hit
        return best

    def _counts_like_a_counter(self, win: TextWindow, cp: int, lag: int) -> bool:
        """Whether the last copies differ in at most a couple of numbers each."""
        limit = self._cfg.counterMaxChangingNumbers
        newer = _NUMBER.findall(win.slice(cp - lag, cp))
        # stay within the horizon, so the answer never depends on how much old text is held
        copies = min(COUNTER_COPIES_CHECKED, win.keep // lag - 1)
        for k in range(1, copies + 1):
            older = _NUMBER.findall(win.slice(cp - (k + 1) * lag, cp - k * lag))
            if sum(a != b for a, b in zip(newer, older, strict=False)) > limit:
                return False
            newer = older
        return True

    def _hit(self, win: TextWindow, rule: str, second_copy: int, lag: int, cp: int) -> Hit:
        first_copy = second_copy - lag
        aligned = _natural_start(win, first_copy, second_copy, cp)
        latest = aligned + ((cp - lag - aligned) // lag) * lag  # a copy that is surely held
        evidence = win.slice(latest, latest + min(lag, 120))
        return Hit(
            rule=rule,
            channel=self._channel,
            prune_offset=aligned + lag,
            loop_start=aligned,
            fired_at=cp,
            repeats=round((cp - aligned) / lag, 2),
            period=lag,
            evidence=excerpt(evidence),
        )

    # -- watermark ----------------------------------------------------------------------------
    def safe_offset(self, win: TextWindow, end: int) -> int:
        """Earliest offset a future cycle/counter hit could prune: ``end`` minus the longest
        suffix that already occurs at a lag within the period range (masked text).

        A second copy looks exactly like such a suffix while it is being written, so all of it
        is held back, however short: in healthy text that is the last few chars of a delta
        (they recur by chance, e.g. "the "), released as soon as the next delta shows that the
        repetition does not go on. With ``holdMinRecurrence`` > 1 shorter suffixes are released
        at once (less lag; a consumer then cuts at what it released, and counts the leak).

        The suffix can grow by at most the chars received since the last call, so the search
        starts from that bound and narrows it by bisection."""
        cfg = self._cfg
        hold_min = cfg.holdMinRecurrence
        e = end - win.base
        bound = min(self._suffix + (end - self._suffix_end), e - cfg.cycleMinPeriod)
        self._suffix_end = end
        if bound < hold_min or bound <= 0:
            self._suffix = max(bound, 0)
            return end

        masked = win.masked
        lag = self._suffix_lag
        if (
            lag
            and e - bound - lag >= 0
            and masked.startswith(masked[e - bound : e], e - bound - lag)
        ):
            # Still recurring where it did last time (always the case inside a loop): the
            # suffix is as long as it can be, and no search is needed.
            self._suffix = bound
            return end - bound

        def recurs(length: int) -> bool:
            lo = e - length - cfg.cycleMaxPeriod
            found = win.rfind_masked(e - length, e, lo, e - cfg.cycleMinPeriod)
            if found < 0:
                return False
            self._suffix_lag = e - length - found
            return True

        self._suffix_lag = 0
        if hold_min > 1 and not recurs(hold_min):
            self._suffix = hold_min - 1
            return end
        good, bad = (hold_min if hold_min > 1 else 0), bound + 1
        if recurs(bound):
            good = bound
        else:
            bad = bound
            while bad - good > 1:
                mid = (good + bad) // 2
                if recurs(mid):
                    good = mid
                else:
                    bad = mid
        if good == 0:
            self._suffix_lag = 0
        self._suffix = good
        return end - good


def _natural_start(win: TextWindow, first: int, second: int, cp: int) -> int:
    """Move the start of the first copy forward to a line start (else a sentence start) inside
    it, so the kept prefix ends on a clean boundary; the kept copy stays complete.

    Copies share their layout, so the boundary is looked up in the latest complete copy, which
    is always still held (the first copy of a long period may not be)."""
    lag = second - first
    latest = first + ((cp - lag - first) // lag) * lag
    raw, lo, hi = win.raw, latest - win.base, latest + lag - win.base
    if raw[lo - 1] == "\n":
        return first
    nl = raw.find("\n", lo, hi - 1)
    if nl >= 0:
        return first + (nl + 1 - lo)
    for mark in ("。", ". ", "! ", "? "):
        pos = raw.find(mark, lo, hi - 1)
        if pos >= 0:
            start = pos + len(mark)
            while start < hi - 1 and raw[start] == " ":
                start += 1
            return first + (start - lo)
    return first
