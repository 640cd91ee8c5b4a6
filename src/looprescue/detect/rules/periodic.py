"""The periodic rules' host: finds runs of one unit repeated for ``cycle`` and ``counter``.

The two rules judge the same thing, a periodic run of the folded text (every number folded to
one char, ``buffer.py``), so one tracker serves both and the registry lists it once: copies
equal, numbers included, are the ``cycle`` rule's (``rules/cycle.py``), copies that differ in
their numbers the ``counter`` rule's (``rules/counter.py``). How many copies a unit needs, and
where a copy starts, is the unit's shape (``copies.py``); the searches are ``period.py``.
Copies that differ in their whitespace or in a word are near-copies: once a run fires,
``nearcopy.py`` extends its cut back over them.

How it stays incremental: at every checkpoint the rule extends the runs it already tracks by
comparing only the new stride against the text one period earlier, looks for new periods by
searching the last ``PROBE`` chars in the window behind them (``str.rfind``, done in C), and
probes the stride for a run of a short unit that began and ended inside it.

Watermark: the longest suffix of the folded text that already occurs one period earlier is held
back (a second copy looks exactly like one while it is written), a run that stopped recurring
until the next checkpoint has judged it, and a run of one repeated digit.

A periodic run that settled out of a reshuffled batch of short phrases or lines is cut where the
batch began (``settle``: the pool's and the lines' ``batch_onset``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import DIGIT_CHARS, TextWindow
from looprescue.detect.copies import (
    A_DIGIT,
    FACTS_REMEMBERED,
    LONG_CODE_LINE_FACTOR,
    NumbersByLine,
    UnitFacts,
    copies_needed,
    copy_spans,
    long_statement,
    natural_start,
    number_changes,
    repeat_hit,
)
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.period import (
    BROKEN_RUN_MIN,
    INDEX_FROM,
    INNER_MAX_LAG,
    INNER_OVERLAP,
    INNER_PROBE,
    INNER_STEP,
    MAX_CANDIDATES,
    MAX_OCCURRENCES,
    MIN_LAG,
    PROBE,
    Run,
    first_mismatch,
    grown,
    last_mismatch,
    match_end,
    primitive_period,
    run_length,
    searched_suffix,
    tail_match,
)
from looprescue.detect.recurrence import SuffixIndex
from looprescue.detect.rule import CHECKPOINT, WATERMARK, Rule
from looprescue.detect.rules.counter import (
    changes_allowed,
    counter_copies_needed,
    counter_shape,
    counter_shape_ready,
    is_counter_loop,
)
from looprescue.detect.rules.cycle import cycle_ready, phrase_batch
from looprescue.detect.segment import Segmenter
from looprescue.detect.shape import Content, content_of, holds_fence_line
from looprescue.detect.suffix_hold import SuffixHold
from looprescue.detect.text import mask_digits

_FEEDS: Final = frozenset({CHECKPOINT, WATERMARK})
# A recurring suffix this short is held back as it is: most are a few chars that recur by
# chance ("the "), and narrowing them to what a rule could cut would cost more than it lets go.
NARROW_FROM: Final = 24


class PeriodicRule(Rule):
    """Tracks periodic runs of one channel's folded text and fires ``cycle`` or ``counter``."""

    def names(self) -> tuple[str, ...]:
        return ("cycle", "counter")

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, cfg: DetectorConfig, structural: bool) -> None:
        self._channel = channel
        self._cfg = cfg
        # The limits the per-delta paths read, as typed attributes: compiled, the config model
        # is an untyped Python object, and arithmetic on what it returns would be boxed.
        self._hold_min: int = cfg.holdMinRecurrence
        self._max_period: int = cfg.cycleMaxPeriod
        self._char_repeats: int = cfg.cycleCharRepeats
        # (copies, chars) multipliers inside a fence, in both channels: code drafted in the
        # reasoning repeats lines as code in the answer does (a table of zeros, a row per line)
        self._fence_factors = (cfg.codeFenceRepeatFactor, cfg.codeFenceFactor)
        self._structural = structural  # the visible-text channel, where lists are structure
        self._runs: dict[int, Run] = {}
        self._copy_numbers = NumbersByLine()
        self._facts: dict[str, UnitFacts] = {}
        # the fewest copies any unit needs (copies_needed, counter_copies: fence factors are
        # at least 1), for one char and for longer units
        self._least_copies = max(2.0, min(cfg.cycleMinRepeats, cfg.counterMinRepeats))
        self._least_copies_one = max(
            2.0, min(cfg.cycleMinRepeats, cfg.counterMinRepeats, cfg.cycleCharRepeats)
        )
        self._last = 0  # folded offset the runs are extended to
        # a repetition that stopped recurring since the last checkpoint is judged at the next
        # one: hold it back until then (raw offset, and the folded end the checkpoint must pass)
        self._broken_from: int | None = None
        self._broken_until = 0
        # safe_offset's memory: the longest recurring suffix at the end of the last call
        self._suffix = 0
        self._suffix_end = 0
        self._suffix_lag = 0  # the nearest lag at which that suffix recurs (0: none known)
        # where the last chars occurred before: made once a search range reaches INDEX_FROM
        # (most answers are shorter)
        self._index: SuffixIndex | None = None
        self._index_from = INDEX_FROM
        # the run of one char the raw text ends with: the char, where it begins, and how far
        # the text was read for it
        self._run_char, self._run_from, self._run_scanned = "", 0, 0
        # narrows the hold to what cycle or counter could still cut of the recurring suffix
        self._hold = SuffixHold(cfg, self._copy_numbers)
        # counter runs walked back for where their copies began changing few numbers: by
        # (first copy, unit), the latest copy walked from and where the counter begins
        self._counted: dict[tuple[int, int], tuple[int, int]] = {}

    # -- checkpoint ---------------------------------------------------------------------------
    def at_checkpoint(
        self, win: TextWindow, cp: int, final: bool, segmenter: Segmenter
    ) -> Hit | None:
        fences = segmenter
        end = win.folded_of(cp)
        best = self._extend(win, end, cp, fences)
        stride_start, self._last = self._last, end
        if not any(end - r.start >= r.lag for r in self._runs.values()):
            self._discover(win, end)
        for hit in (
            self._evaluate(win, end, cp, fences),
            self._inner_runs(win, stride_start, end, cp, fences),
        ):
            if hit is not None and (best is None or hit.prune_offset < best.prune_offset):
                best = hit
        return best

    def _inner_runs(
        self, win: TextWindow, stride_start: int, end: int, cp: int, fences: Segmenter
    ) -> Hit | None:
        """Judge the runs of a short unit that began and ended inside the stride.

        Runs are otherwise found where they reach a checkpoint, and a short unit repeated a
        dozen times (``生命中的`` x 14, 56 chars) can start and stop between two. Such a run is
        found by probing the stride every ``INNER_STEP`` chars: ``INNER_PROBE`` chars that
        occur again at most ``INNER_MAX_LAG`` chars before. Probes start a little before the
        stride, for a run that the last checkpoint cut in two. A run that reaches the
        checkpoint is left to the tracked runs."""
        folded, base = win.folded, win.fbase
        e = end - base
        floor = max(0, end - win.keep - base)  # the horizon: never depends on trimming
        lo = max(stride_start - base - INNER_OVERLAP, floor + INNER_MAX_LAG)
        lo += -(lo + base) % INNER_STEP  # probes sit at absolute offsets: any chunking agrees
        best: Hit | None = None
        judged_until = lo
        for i in range(lo, e - INNER_PROBE, INNER_STEP):
            if i < judged_until:
                continue  # inside a run judged already
            j = folded.rfind(folded[i : i + INNER_PROBE], i - INNER_MAX_LAG, i + INNER_PROBE - 1)
            if j < 0:
                continue
            lag = i - j
            # how far the run goes on after the probe, up to the checkpoint
            stop = match_end(folded, i, lag, e)
            if stop >= e:
                continue  # reaches the checkpoint: a tracked run's business
            length = run_length(folded, stop, lag, stop - i, floor)
            first = stop - length - lag
            judged_until = stop
            unit = primitive_period(folded[first:stop], lag)
            if stop - first < (self._char_repeats if unit == 1 else 2 * unit):
                continue  # far too few copies (one char needs dozens)
            run = Run(lag, first + base + lag, unit)
            hit = self._judge(win, run, stop + base, cp, fences)
            if hit is not None and (best is None or hit.prune_offset < best.prune_offset):
                best = hit
        return best

    def _extend(self, win: TextWindow, end: int, cp: int, fences: Segmenter) -> Hit | None:
        """Carry the runs over the new stride. A run that broke inside it is judged as it was
        at the break (the watermark held it back until now): a loop that stopped between two
        checkpoints, as excerpts and clients that cut a loop short do, still counts."""
        start = self._last
        if start >= end or not self._runs:
            return None
        folded, base = win.folded, win.fbase
        a, b = start - base, end - base
        best: Hit | None = None
        for lag in list(self._runs):
            run = self._runs[lag]
            if a - lag < 0:
                del self._runs[lag]
                continue
            new, old = folded[a:b], folded[a - lag : b - lag]
            if new != old:
                hit = self._judge(win, run, start + first_mismatch(new, old), cp, fences)
                if hit is not None and (best is None or hit.prune_offset < best.prune_offset):
                    best = hit
                run.start = max(run.start, start + last_mismatch(new, old) + 1)
            if end - run.start < PROBE:
                del self._runs[lag]
        return best

    def _discover(self, win: TextWindow, end: int) -> None:
        folded, base = win.folded, win.fbase
        b = end - base
        if b < PROBE + MIN_LAG:
            return
        floor = max(0, end - win.keep - base)  # the horizon: never depends on trimming
        lo = max(0, b - PROBE - self._max_period)
        hi = b - MIN_LAG  # an occurrence must end at least one minimal lag back
        for _ in range(MAX_OCCURRENCES):
            j = folded.rfind(folded[b - PROBE : b], lo, hi)
            if j < 0:
                return
            hi = j + PROBE - 1
            lag = b - PROBE - j
            if lag in self._runs:
                continue
            length = run_length(folded, b, lag, PROBE, floor)
            stretch = folded[b - length - lag : b]
            self._runs[lag] = Run(lag, end - length, primitive_period(stretch, lag))
            if len(self._runs) > MAX_CANDIDATES:
                weakest = min(self._runs.values(), key=lambda r: end - r.start)
                del self._runs[weakest.lag]
            if length >= 2 * lag:
                return  # a strong run: older occurrences are its multiples

    # -- firing -------------------------------------------------------------------------------
    def _evaluate(self, win: TextWindow, end: int, cp: int, fences: Segmenter) -> Hit | None:
        best: Hit | None = None
        for run in self._runs.values():
            hit = self._judge(win, run, end, cp, fences)
            if hit is not None and (best is None or hit.prune_offset < best.prune_offset):
                best = hit
        return best

    def _judge(self, win: TextWindow, run: Run, end: int, cp: int, fences: Segmenter) -> Hit | None:
        if run.unit < self._cfg.cycleMinPeriod:
            return None
        # where the periodic stretch begins
        return self._judge_stretch(win, run.start - run.lag, run.unit, end, cp, fences, False)

    def _judge_stretch(
        self,
        win: TextWindow,
        first: int,
        unit: int,
        end: int,
        cp: int,
        fences: Segmenter,
        exact: bool,
    ) -> Hit | None:
        """Judge the stretch from folded offset ``first`` to ``end``, periodic with ``unit``;
        ``exact``: its raw copies are known to be the same, numbers and all."""
        cfg = self._cfg
        # The kept copy starts inside the first one, so there are at most this many copies:
        # fewer than any rule needs is nothing yet (most runs are judged at two copies).
        if end - first < (self._least_copies_one if unit == 1 else self._least_copies) * unit:
            return None
        # Copies are counted, and their shape judged, from the kept copy's natural start: a
        # stretch can begin mid-unit when the text before the loop ends like the unit does.
        onset = natural_start(win, first, unit, end)
        copies = (end - onset) / unit
        if copies < 2:
            return None
        latest = onset + (int(copies) - 1) * unit  # the last complete copy
        latest_raw = win.raw_of(latest)
        text = win.slice(latest_raw, win.raw_of(latest + unit))
        facts = self._facts_of(text)
        if facts.content is Content.LAYOUT:
            return None
        # where the repetition is now decides (a loop that began as prose can run into a fence);
        # a copy that opens or closes a fence is markdown around the code, not code alone
        in_fence = fences.fenced(latest_raw) and not holds_fence_line(text)
        more_copies, more_chars = self._fence_factors if in_fence else (1.0, 1.0)
        if in_fence and facts.long_statement:
            more_copies = min(more_copies, LONG_CODE_LINE_FACTOR)
        raw_chars = win.raw_of(end) - win.raw_of(onset)
        ready = cycle_ready(cfg, facts.cycle_copies, copies, raw_chars, more_copies, more_chars)
        shape = counter_shape_ready(cfg, facts, win, onset, end, raw_chars, copies, in_fence)
        counter_ready = shape is not None and copies >= facts.counter_copies
        if not (ready or counter_ready):
            return None
        # copies equal once folded hold the same numbers when the unit has none; else the
        # last few copies (raw spans) tell a counter from a cycle by their numbers
        spans: list[tuple[int, int]] = []
        changes = 0
        if facts.has_digit:
            spans = copy_spans(win, latest, unit, min(int(copies), 6))
            changes = number_changes(self._copy_numbers, win, spans)
        if changes == 0:
            if not ready:
                return None
            if facts.has_digit and not exact:
                # A cycle is copies said again as they were: a log or a table whose numbers
                # moved on until the model got stuck on one line loops from where its copies
                # became the same, and the lines before that are no part of it.
                same = self._same_from(win, first, latest, unit, end)
                if same > first:
                    return self._judge_stretch(win, same, unit, end, cp, fences, True)
            return self._hit(win, "cycle", first, onset, unit, end, cp, text, in_fence)
        if (
            counter_ready
            and shape is not None
            and is_counter_loop(
                cfg, shape, changes, self._copy_numbers, win, spans, latest, unit, int(copies)
            )
        ):
            # A counter's copies change a few numbers: lines before them that changed more (a
            # log, a table that moved on until the model got stuck) are no part of its loop.
            begun = self._counted_from(win, onset, latest, unit, changes_allowed(cfg, shape))
            if begun > onset:
                return self._judge_stretch(win, begun, unit, end, cp, fences, exact)
            return self._hit(win, "counter", first, onset, unit, end, cp, text, in_fence)
        return None

    def _counted_from(self, win: TextWindow, onset: int, latest: int, unit: int, most: int) -> int:
        """Folded offset of the earliest copy from which every copy changed at most ``most``
        numbers on a line against the one before it, walking back from the copy at ``latest``
        to the one at ``onset``. A run is judged at every checkpoint: the pairs of copies
        walked are remembered by the run's first copy, so each pair is compared once."""
        key = (onset, unit)
        walked, begun = self._counted.get(key, (onset, onset))
        at = latest
        floor = max(walked, onset, win.fbase + unit)
        while at > floor:
            older = (win.raw_of(at - unit), win.raw_of(at))
            newer = (older[1], win.raw_of(at + unit))
            if self._copy_numbers.changes(win, newer, older) > most:
                begun = at  # the newest pair that changed more: the counter begins after it
                break
            at -= unit
        if len(self._counted) >= FACTS_REMEMBERED:
            self._counted.clear()
        self._counted[key] = (latest, begun)
        return begun

    def _facts_of(self, text: str) -> UnitFacts:
        """What the shape of one copy says, remembered by its text with digits masked: a run is
        judged at every checkpoint, and its copies read the same but for their numbers."""
        key = mask_digits(text)
        facts = self._facts.get(key)
        if facts is None:
            if len(self._facts) >= FACTS_REMEMBERED:
                self._facts.clear()
            content = content_of(text)
            shape = counter_shape(text, content)
            facts = self._facts[key] = UnitFacts(
                content=content,
                cycle_copies=copies_needed(self._cfg, text, content),
                counter_shape=shape,
                counter_copies=(
                    counter_copies_needed(self._cfg, text, shape) if shape is not None else math.inf
                ),
                long_statement=long_statement(text, content),
                has_digit=A_DIGIT.search(text) is not None,
            )
        return facts

    def settle(self, win: TextWindow, hit: Hit, rules: list[Rule]) -> Hit:
        """A periodic loop of short phrases or lines that settled out of a reshuffled batch of
        them (``OK. Go. OK. OK. Go. Now. Go. Now. Go. Now.``) began where the batch did: the
        cut moves there and keeps none of it, as the pool's and the lines' own cuts do. Their
        runs are held back by the watermark from their start, so the cut stays honest."""
        earliest = hit.loop_start
        for rule in rules:
            onset = rule.batch_onset()
            if onset is not None and onset < earliest:
                earliest = onset
        if earliest == hit.loop_start:
            return hit
        return replace(hit, loop_start=earliest, prune_offset=earliest)

    def _same_from(self, win: TextWindow, first: int, latest: int, unit: int, end: int) -> int:
        """Folded offset where the raw text up to ``end`` began repeating the latest copy (at
        ``latest``) exactly: the stretch from ``first`` is periodic once numbers are folded,
        and its last copies are the same raw text (a constant raw lag)."""
        base = win.base
        lag = win.raw_of(latest + unit) - win.raw_of(latest)
        stop = win.raw_of(end) - base
        floor = max(0, win.raw_of(first) - base)
        if lag <= 0 or stop - lag <= floor:
            return first
        length = run_length(win.raw, stop, lag, 0, floor)
        return max(first, win.folded_of(base + stop - length - lag))

    def _hit(
        self,
        win: TextWindow,
        rule: str,
        first: int,
        onset: int,
        unit: int,
        end: int,
        cp: int,
        text: str,
        in_fence: bool,
    ) -> Hit:
        # a rotation of short phrases: cut where its first phrase appeared
        batch = (
            rule == "cycle"
            and not in_fence
            and phrase_batch(self._cfg, self._structural, text, (end - onset) / unit)
        )
        return repeat_hit(win, self._channel, rule, first, onset, unit, end, cp, text, batch)

    # -- watermark ----------------------------------------------------------------------------
    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """Earliest offset a future cycle/counter hit could prune: where the longest suffix of
        the folded text that already occurs one period (1…``cycleMaxPeriod``) earlier begins.

        A second copy looks exactly like such a suffix while it is being written, so all of it
        is held back, however short: in healthy text that is the last few chars of a delta
        (they recur by chance, e.g. "the "), released as soon as the next delta shows that the
        repetition does not go on. With ``holdMinRecurrence`` > 1 shorter suffixes are released
        at once (less lag; a consumer then cuts at what it released, and counts the leak).

        The suffix can grow by at most the chars received since the last call, which bounds the
        search. Inside a run it still recurs at the lag it did (one comparison); otherwise the
        places its last three chars occurred before are tried, nearest first (``SuffixIndex``:
        a call costs the chars it indexes and those places, not a scan of the period range)."""
        held = min(self._suffix_offset(win, segmenter), self._digit_run_offset(win))
        if self._broken_from is not None:
            if self._last >= self._broken_until:
                self._broken_from = None  # judged by now: it was no loop
            else:
                return min(held, self._broken_from)
        return held

    def _digit_run_offset(self, win: TextWindow) -> int:
        """Where the run of one repeated digit the text ends with begins (``序号：1111…``).
        Folding turns a number into one char, so the suffix search sees such a run only once
        it is longer than a number; the cut of its loop falls at its first digit."""
        end = win.synced
        if end > self._run_scanned:
            start = max(self._run_scanned, win.base)
            new = win.raw[start - win.base : end - win.base]
            last = new[-1]
            rest = new.rstrip(last)
            if rest or last != self._run_char or start > self._run_scanned:
                self._run_from = start + len(rest)
            self._run_char, self._run_scanned = last, end
        if self._run_char in DIGIT_CHARS:
            return self._run_from + self._hold_min - 1
        return end

    def _suffix_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        hold_min = self._hold_min
        end = win.fend
        e = end - win.fbase
        bound = min(self._suffix + (end - self._suffix_end), e - 1)
        previous, previous_end, previous_lag = self._suffix, self._suffix_end, self._suffix_lag
        self._suffix_end = end
        if bound < hold_min or bound <= 0:
            self._suffix = max(bound, 0)
            return win.synced

        folded = win.folded
        lag = self._suffix_lag
        if (
            lag
            and e - bound - lag >= 0
            and folded[e - bound - lag : e - lag] == folded[e - bound : e]
        ):
            # Still recurring where it did last time (always the case inside a loop): the
            # suffix is as long as it can be, and no search is needed.
            self._suffix = bound
            return self._held(win, segmenter, bound, lag)

        good, lag = self._recurring_suffix(win, bound)
        if good < hold_min:
            good, lag = hold_min - 1, 0  # shorter suffixes are released whether they recur or not
        self._suffix_lag = lag
        self._suffix = good
        broken_min = max(BROKEN_RUN_MIN, 2 * previous_lag)
        if (
            good < bound
            and previous_lag
            and previous + end - previous_end >= broken_min
            # the run went on into the new chars as far as they still match at its lag (a
            # delta can end a copy and break the run at once)
            and previous + grown(folded, previous_end - win.fbase, e, previous_lag) >= broken_min
        ):
            # a run of two copies or more stopped recurring: the next checkpoint judges it,
            # from where its hold began
            start = max(win.raw_of(previous_end - previous), self._hold.returned)
            if self._broken_from is None or start < self._broken_from:
                self._broken_from = start
            self._broken_until = max(self._broken_until, end)
        if good < max(1, hold_min):
            return win.synced
        return self._held(win, segmenter, good, lag)

    def _held(self, win: TextWindow, segmenter: Segmenter, good: int, lag: int) -> int:
        """Raw offset from which the recurring suffix (``good`` folded chars at ``lag``) is
        held: as much of it as cycle or counter could still cut (``suffix_hold.py``)."""
        if lag <= 0 or good <= NARROW_FROM:
            # a few chars: not worth the reading (but what a longer suffix let go stays out)
            return max(win.raw_of(win.fend - good), self._hold.returned)
        return self._hold.held_from(win, segmenter, good, lag, self._facts_of)

    def _recurring_suffix(self, win: TextWindow, bound: int) -> tuple[int, int]:
        """The longest suffix of the folded text (``bound`` chars at most) that ended before,
        1…``cycleMaxPeriod`` chars earlier and inside the window, and the nearest lag it did
        at (0, 0: none). Over a range shorter than ``INDEX_FROM`` chars ``str.rfind`` finds it
        at less cost than indexing the chars. Else one of three chars or more ends where its
        last three did: the index's chain of their hash, nearest first; a shorter one is the
        latest place of its hash, or, when another string has that hash, found by ``rfind``."""
        folded, fbase, end = win.folded, win.fbase, win.fend
        e = end - fbase
        if min(e, self._max_period) < self._index_from:
            return searched_suffix(folded, e, bound, self._max_period)
        index = self._index
        if index is None:
            index = self._index = SuffixIndex(self._max_period)
        index.update(folded, fbase, end)
        lo = end - self._max_period  # an earlier copy ends here at the earliest
        good = lag = 0
        if bound >= 3:
            j = index.latest(3)
            floor = max(lo, fbase + 3)
            last, second, third = ord(folded[e - 1]), ord(folded[e - 2]), ord(folded[e - 3])
            while j >= floor:
                at = j - fbase
                if (
                    ord(folded[at - 1]) == last
                    and ord(folded[at - 2]) == second
                    and ord(folded[at - 3]) == third  # (else another trigram's hash)
                ):
                    length = tail_match(folded, e, end - j, 3, min(bound, at))
                    if length > good:
                        good, lag = length, end - j
                        if length >= bound:
                            break
                j = index.before(j)
        n = min(bound, 2)
        while good == 0 and n >= 1:
            j = index.latest(n)
            if j >= max(lo, fbase + n):
                if folded.startswith(folded[e - n : e], j - fbase - n):
                    good, lag = n, end - j
                    break
                # another string with its hash was the latest: search
                found = folded.rfind(folded[e - n : e], max(0, lo - fbase - n), e - 1)
                if found >= 0:
                    good, lag = n, e - n - found
                    break
            n -= 1
        return good, lag
