"""Rules ``cycle`` and ``counter``: the tail of the stream is one unit repeated.

Both are judged on the folded text (every number folded to one char, see ``buffer.py``), where
a counter loop (``Step 9: …``, ``Step 10: …``) is exactly periodic. ``cycle`` needs copies
whose numbers are the same too; ``counter`` is the rest, and fires only for shapes that are not
a legitimate enumeration. Copies that differ in their whitespace or in a word are near-copies:
once a run fires, ``nearcopy.py`` extends its cut back over them.

Why a repeated unit is a loop, and how many copies that takes (``copies_needed``):

* layout (rules, borders, table separators, whitespace) repeated is never a loop;
* a unit with words repeated back to back is: a short one after ``cycleShortRepeats`` copies
  (10 copies of one phrase is what a person spots as "stuck"), a longer one once its copies fill
  ``cycleEarlyChars`` (a CJK char counted as two, ``shape.text_width``), a block of several
  sentences or lines after ``cycleBlockRepeats`` copies, never fewer than ``cycleMinRepeats``;
  one letter after ``cycleCharRepeats``;
* digits alone (a chant of digits) count as words do; numbers with punctuation (``1. 1. 1.``,
  ``0, 0, 0``) and marks (``#``, ``//``) need twice the copies, being data or emphasis more
  often; one char that is not a letter, twice ``cycleCharRepeats``;
* a clause of words said again inside a sentence (``x，x，x，``, see ``rules/stutter.py``)
  after ``cycleClauseRepeats`` copies;
* any unit but layout also fires once ``cycleMinRepeats`` copies fill ``cycleMinChars``;
* inside a code fence the copies are ``codeFenceRepeatFactor`` times as many, and the long-run
  chars ``codeFenceFactor`` times: code repeats lines; one long line of words
  (``LONG_CODE_LINE`` chars or more) repeated back to back needs 1.5 times the copies, as code
  would write that as a loop.

A counter template (copies identical but for their numbers) is what a user gets when they ask for
40 CSS classes, a JSON array, log lines or numbered stubs, so it is only a loop when its unit is
prose of several lines (a step block restated with a new number), a table row whose only change
is its row number, a list item whose text stays while its list number counts on (``12.
Banana``, ``13. Banana``), or hardly any text at all (``t1t2t3…``: a chant of numbers, which
needs ``cycleCharRepeats`` copies); it needs one copy more than a cycle (a prose block, or a list
item whose words stay the same: as many; an item whose sentence stays: as many as a block),
``counterMinRepeats`` at least, and copies that fill ``counterMinChars`` (a CJK char counted as
two, as for ``cycleEarlyChars``).

Prune point: one copy of the unit is kept, counted from where the repetition really starts (the
run is extended backwards as far as it holds and reduced to its primitive period), moved to a
line or sentence start inside the first copy.

How it stays incremental: at every checkpoint the rule extends the runs it already tracks by
comparing only the new stride against the text one period earlier, and looks for new periods by
searching the last ``PROBE`` chars in the window behind them (``bytes.rfind``, done in C).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from itertools import pairwise
from operator import ne
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import DIGIT_CHARS, TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.limits import HOLD_CHARS, pool_horizon
from looprescue.detect.recurrence import SuffixIndex
from looprescue.detect.rule import CHECKPOINT, WATERMARK, Rule
from looprescue.detect.segment import Segmenter
from looprescue.detect.shape import (
    CLAUSE_MARKS,
    NO_SPACES_SCRIPT,
    Content,
    content_of,
    is_letter,
    is_one_clause,
    is_table_row,
    letters_in,
    looks_like_code,
    numbered_item_body,
    numbers_of,
    text_width,
    units_in,
)
from looprescue.detect.text import (
    LineKind,
    classify_line,
    excerpt,
    mask_digits,
    normalize_phrase,
)

_FEEDS: Final = frozenset({CHECKPOINT, WATERMARK})

# Length of the folded suffix searched for in the window: long enough that a chance match in
# prose is rare; shorter loops are found through a multiple of their period.
PROBE: Final = 24
# The watermark's suffix search indexes the text (``recurrence.py``) once the range it searches
# is this long: below it, ``str.rfind`` over the range costs less than indexing the new chars
# (the index spends about 600 instructions per char when compiled, a failing ``rfind`` about 5
# per char of the range).
INDEX_FROM: Final = 1024
# Smallest lag searched for; the primitive period found inside a run may be shorter.
MIN_LAG: Final = 16
# A recurring suffix at least this long (and two copies) that stops recurring is held until
# the next checkpoint has judged the run it ended.
BROKEN_RUN_MIN: Final = 16
# Lags tracked at once; more than a handful only happens in highly regular text (tables), where
# the longest runs are the interesting ones.
MAX_CANDIDATES: Final = 8
# Runs of a short unit that start and stop between two checkpoints: probed every INNER_STEP
# chars with INNER_PROBE chars, at lags up to INNER_MAX_LAG (the short units: a unit under 16
# chars repeated ten times or more is 20-160 chars, and fits inside a stride). INNER_OVERLAP
# reaches back into the last stride for a run the checkpoint cut in two.
INNER_PROBE: Final = 8
INNER_STEP: Final = 24
INNER_MAX_LAG: Final = 16
INNER_OVERLAP: Final = 24
# Older occurrences of the probe tried per checkpoint, to get past repeats inside one unit.
MAX_OCCURRENCES: Final = 8
_SENTENCE_MARKS: Final = ("。", "！", "？", ". ", "! ", "? ")
# A sentence (or the rest of the text after the last sentence end), as the segmenter cuts them.
_SENTENCE: Final = re.compile(r"[^。！？\n]*?(?:[。！？\n]|[.!?](?=\s)|$)\s*")
# Where a numbered item begins inside a line: "…，13. 从…", "… 4) Then…".
_ITEM_START: Final = re.compile(r"(?<![0-9])[0-9]{1,4}[.)、] ?(?=[^\s0-9])")
_CLAUSE_END: Final = re.compile(f"[{CLAUSE_MARKS}] *")
_ENDS_SENTENCE: Final = re.compile(r"(?:[。！？\n]|[.!?]\s)\s*$")
# A renumbered list item at least this wide (``shape.text_width``) is a sentence, not an answer
# word: copies of it are a block restated (``cycleBlockRepeats``).
SENTENCE_ITEM_WIDTH: Final = 40
# A counter template with at most this many letters (a CJK char counted as two) is a chant of
# numbers, not an enumeration anyone asked for (``t1t2t3``, ``1stu2stu``; ``用户编号 7`` is
# words).
TINY_TEMPLATE_LETTERS: Final = 4


@dataclass(slots=True)
class _Run:
    lag: int
    start: int  # first folded position whose char equals the one `lag` earlier, up to now
    unit: int  # primitive period of the run (a divisor of lag)


def _first_mismatch(a: str, b: str) -> int:
    """Index of the first position where equal-length ``a`` and ``b`` differ (they do)."""
    lo, hi = 0, len(a)  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


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


def _grown(text: str, at: int, end: int, lag: int) -> int:
    """How many chars of ``text[at:end]`` go on matching the text ``lag`` chars earlier."""
    if at - lag < 0 or at >= end:
        return 0
    new, old = text[at:end], text[at - lag : end - lag]
    return len(new) if new == old else _first_mismatch(new, old)


def _searched_suffix(text: str, e: int, bound: int, max_period: int) -> tuple[int, int]:
    """``PeriodicRule._recurring_suffix`` by ``str.rfind``: lengths from short to long, each
    found at its nearest lag and followed back as far as it matches there; the next try is one
    char longer (a call pays for one search of the whole range: the last try, which fails)."""
    good = lag = 0
    length = 1
    stop = e - 1  # a recurrence ends at least one char before the end
    while length <= bound:
        found = text.rfind(text[e - length : e], max(0, e - length - max_period), stop)
        if found < 0:
            break
        lag = e - length - found
        good = _tail_match(text, e, lag, length, min(bound, e - lag))
        length = good + 1
        # A longer suffix recurs at no nearer lag (its shorter one would have been found
        # there), and not at this one (the match stopped): it ends further back.
        stop = e - lag - 1
    return good, lag


def _tail_match(text: str, end: int, lag: int, known: int, most: int) -> int:
    """Longest L <= ``most`` (>= ``known``, which match) with text[end-L:end] equal to the text
    ``lag`` chars earlier: a few chars one by one (a chance match ends within them), then a
    galloping search."""
    k = known
    stop = min(most, known + 16)
    while k < stop:
        if ord(text[end - k - 1]) != ord(text[end - k - 1 - lag]):  # (compiled: no str made)
            return k
        k += 1
    return k if k >= most else _run_length(text, end, lag, k, end - lag - most)


def _match_end(text: str, at: int, lag: int, limit: int) -> int:
    """Where the match of ``text[at:]`` with the text ``lag`` chars earlier stops (at most
    ``limit``); ``text[at:at + INNER_PROBE]`` is known to match (galloping, then halving)."""
    good = min(at + INNER_PROBE, limit)
    step = INNER_PROBE
    while good < limit:
        trial = min(good + step, limit)
        if not text.startswith(text[good:trial], good - lag):
            break
        good = trial
        step *= 2
    else:
        return limit
    bad = trial  # text[good:bad] does not match all through
    while bad - good > 1:
        mid = (good + bad) // 2
        if text.startswith(text[good:mid], good - lag):
            good = mid
        else:
            bad = mid
    return good


def primitive_period(stretch: str, lag: int) -> int:
    """The primitive period of a ``lag``-periodic ``stretch``: the smallest rotation period of
    one copy (a divisor of ``lag``), found by one substring search."""
    unit = stretch[:lag]
    return (unit + unit).find(unit, 1)


@dataclass(slots=True, frozen=True)
class _UnitFacts:
    """The shape facts of one copy that decide how many copies make a loop. Every one of them
    reads digits only as "a digit", so copies that differ in their numbers share them."""

    content: Content
    cycle_copies: float
    counter_shape: str | None  # outside a fence (inside one, a counter template is code)
    counter_copies: float
    long_statement: bool
    has_digit: bool


# Copy shapes remembered per rule: a handful of runs is judged at a time.
FACTS_REMEMBERED: Final = 256


class PeriodicRule(Rule):
    """Tracks periodic runs of one channel's folded text and fires ``cycle`` or ``counter``."""

    def names(self) -> tuple[str, ...]:
        return ("cycle", "counter")

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, cfg: DetectorConfig, fence_guard: bool) -> None:
        self._channel = channel
        self._cfg = cfg
        # The limits the per-delta paths read, as typed attributes: compiled, the config model
        # is an untyped Python object, and arithmetic on what it returns would be boxed.
        self._hold_min: int = cfg.holdMinRecurrence
        self._max_period: int = cfg.cycleMaxPeriod
        self._char_repeats: int = cfg.cycleCharRepeats
        # (copies, chars) multipliers inside a fence: visible text only (reasoning quotes code)
        self._fence_factors = (
            (cfg.codeFenceRepeatFactor, cfg.codeFenceFactor) if fence_guard else (1.0, 1.0)
        )
        self._structural = fence_guard  # the visible-text channel, where lists are structure
        self._runs: dict[int, _Run] = {}
        self._copy_numbers = _NumbersByLine()
        self._facts: dict[str, _UnitFacts] = {}
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
            stop = _match_end(folded, i, lag, e)
            if stop >= e:
                continue  # reaches the checkpoint: a tracked run's business
            length = _run_length(folded, stop, lag, stop - i, floor)
            first = stop - length - lag
            judged_until = stop
            unit = primitive_period(folded[first:stop], lag)
            if stop - first < (self._char_repeats if unit == 1 else 2 * unit):
                continue  # far too few copies (one char needs dozens)
            run = _Run(lag, first + base + lag, unit)
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
                hit = self._judge(win, run, start + _first_mismatch(new, old), cp, fences)
                if hit is not None and (best is None or hit.prune_offset < best.prune_offset):
                    best = hit
                run.start = max(run.start, start + _last_mismatch(new, old) + 1)
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
            length = _run_length(folded, b, lag, PROBE, floor)
            stretch = folded[b - length - lag : b]
            self._runs[lag] = _Run(lag, end - length, primitive_period(stretch, lag))
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

    def _judge(
        self, win: TextWindow, run: _Run, end: int, cp: int, fences: Segmenter
    ) -> Hit | None:
        cfg = self._cfg
        unit = run.unit
        if unit < cfg.cycleMinPeriod:
            return None
        first = run.start - run.lag  # where the periodic stretch begins
        # The kept copy starts inside the first one, so there are at most this many copies:
        # fewer than any rule needs is nothing yet (most runs are judged at two copies).
        if end - first < (self._least_copies_one if unit == 1 else self._least_copies) * unit:
            return None
        # Copies are counted, and their shape judged, from the kept copy's natural start: a
        # stretch can begin mid-unit when the text before the loop ends like the unit does.
        onset = _natural_start(win, first, unit, end)
        copies = (end - onset) / unit
        if copies < 2:
            return None
        latest = onset + (int(copies) - 1) * unit  # the last complete copy
        latest_raw = win.raw_of(latest)
        text = win.slice(latest_raw, win.raw_of(latest + unit))
        facts = self._facts_of(text)
        if facts.content is Content.LAYOUT:
            return None
        # where the repetition is now decides (a loop that began as prose can run into a fence)
        in_fence = fences.fenced(latest_raw)
        more_copies, more_chars = self._fence_factors if in_fence else (1.0, 1.0)
        if in_fence and facts.long_statement:
            more_copies = min(more_copies, LONG_CODE_LINE_FACTOR)
        raw_chars = win.raw_of(end) - win.raw_of(onset)
        cycle_ready = copies >= facts.cycle_copies * more_copies or (
            copies >= cfg.cycleMinRepeats and raw_chars >= cfg.cycleMinChars * more_chars
        )
        # a counter needs counterMinRepeats copies whatever its shape (never one in a fence),
        # and copies that fill counterMinChars, a CJK char counted as two
        shape = (
            facts.counter_shape
            if not in_fence
            and copies >= cfg.counterMinRepeats
            and _fills(win, onset, end, raw_chars, cfg.counterMinChars)
            else None
        )
        counter_ready = shape is not None and copies >= facts.counter_copies
        if not (cycle_ready or counter_ready):
            return None
        # copies equal once folded hold the same numbers when the unit has none; else the
        # last few copies (raw spans) tell a counter from a cycle by their numbers
        spans: list[tuple[int, int]] = []
        changes = 0
        if facts.has_digit:
            spans = _copy_spans(win, latest, unit, min(int(copies), 6))
            changes = self._number_changes(win, spans)
        if changes == 0:
            if cycle_ready:
                return self._hit(win, "cycle", first, onset, unit, end, cp, text, in_fence)
            return None
        if (
            counter_ready
            and (changes <= cfg.counterMaxChangingNumbers or shape == "renumbered")
            and (shape != "table" or changes == 1)
            and (shape != "item" or self._not_an_enumeration(win, spans))
            and (shape != "renumbered" or _content_gone(_copy_texts(win, latest, unit, 6)))
        ):
            return self._hit(win, "counter", first, onset, unit, end, cp, text, in_fence)
        return None

    def _facts_of(self, text: str) -> _UnitFacts:
        """What the shape of one copy says, remembered by its text with digits masked: a run is
        judged at every checkpoint, and its copies read the same but for their numbers."""
        key = mask_digits(text)
        facts = self._facts.get(key)
        if facts is None:
            if len(self._facts) >= FACTS_REMEMBERED:
                self._facts.clear()
            content = content_of(text)
            shape = self._counter_shape(text, content)
            facts = self._facts[key] = _UnitFacts(
                content=content,
                cycle_copies=self.copies_needed(text, content),
                counter_shape=shape,
                counter_copies=(
                    self._counter_copies_needed(text, shape) if shape is not None else math.inf
                ),
                long_statement=_long_statement(text, content),
                has_digit=_A_DIGIT.search(text) is not None,
            )
        return facts

    def copies_needed(self, unit: str, content: Content) -> float:
        """Copies of a unit (raw text of one copy) that make its repetition a loop."""
        cfg = self._cfg
        size = len(unit)
        # numbers and marks are data or emphasis more often than words are: twice the copies
        doubt = 1.0 if content is Content.WORDS or content is Content.DIGITS else 2.0
        if size == 1:
            return cfg.cycleCharRepeats * (1.0 if is_letter(unit) else 2.0)
        need = max(
            cfg.cycleMinRepeats,
            min(cfg.cycleShortRepeats, math.ceil(cfg.cycleEarlyChars / text_width(unit))),
        )
        if units_in(unit) >= 2:
            need = min(need, max(cfg.cycleMinRepeats, cfg.cycleBlockRepeats))
        elif content is Content.WORDS and is_one_clause(unit):
            need = min(need, max(cfg.cycleMinRepeats, cfg.cycleClauseRepeats))
        return need * doubt

    def _counter_shape(self, unit: str, content: Content) -> str | None:
        """Which kind of counter template the unit is, when its repetition can be a loop:
        ``table`` (a row: a loop when only its row number changes), ``renumbered`` (a list
        item whose content is gone: only its number, or only numbers), ``tiny`` (hardly any
        text), ``block`` (several sentences or lines of prose), ``item`` (one line: a loop
        only when its numbers do not count up, else it is an enumeration). None: code, data,
        or what a user asks for. (Inside a fence a counter template is always code.)"""
        if is_table_row(unit):
            return "table" if content in (Content.WORDS, Content.NUMERIC) else None
        if _same_item_renumbered(unit):
            return "renumbered"
        if content is not Content.WORDS or looks_like_code(unit):
            return None
        block = units_in(unit) >= 2
        if letters_in(unit) + len(NO_SPACES_SCRIPT.findall(unit)) <= TINY_TEMPLATE_LETTERS:
            # a row of results (``7 x 12 = 12``) is judged like an item: by whether its result
            # changes, not by the many copies a chant of numbers needs
            return "item" if "=" in unit and not block else "tiny"
        return "block" if block else "item"

    def _counter_copies_needed(self, unit: str, shape: str) -> float:
        cfg = self._cfg
        if shape == "tiny":
            return max(cfg.counterMinRepeats, cfg.cycleCharRepeats)
        words = shape == "renumbered" and letters_in(unit) > 0
        if words and text_width(unit) >= SENTENCE_ITEM_WIDTH:
            # a sentence that stays while its list number counts on is a block restated: a
            # list of answers repeats a short word ("Yes", "无"), not a sentence
            return max(cfg.counterMinRepeats, cfg.cycleMinRepeats, cfg.cycleBlockRepeats)
        if shape == "block" or words:
            # several lines of prose restated with only a number changed, or one list item
            # whose words stay while its list number counts on: a copy of the same words is as
            # plain a loop as a verbatim one, and as long a unit to wait for
            return max(cfg.counterMinRepeats, self.copies_needed(unit, Content.WORDS))
        return max(cfg.counterMinRepeats, self.copies_needed(unit, Content.WORDS) + 1)

    def _not_an_enumeration(self, win: TextWindow, spans: list[tuple[int, int]]) -> bool:
        """A one-line counter template is an enumeration (what was asked for) when an index
        counts up, unless it is a row of results whose result never changes (``7 x 12 = 12``).
        Judged on the last few copies (their raw spans, oldest first)."""
        if len(spans) < 3:
            return False  # too few copies to tell: an enumeration by default
        if "=" in win.slice(*spans[-1]):
            texts = [win.slice(*span) for span in spans]
            results = [numbers_of(t.rsplit("=", 1)[1]) for t in texts if "=" in t]
            if len(results) == len(texts) and results[0] and all(r == results[0] for r in results):
                return True
        rows = [self._copy_numbers.values(win, span) for span in spans]
        for position in range(min(len(row) for row in rows)):
            steps = {rows[k + 1][position] - rows[k][position] for k in range(len(rows) - 1)}
            if len(steps) == 1 and steps.pop() > 0:
                return False  # an index: it counts up by one step
        return True

    def _phrase_batch(self, unit: str, copies: float) -> bool:
        """Whether the unit is a handful of short phrases the pool rule would count
        (``Now. OK. Emit. Producing.``): such a loop keeps none of them, like a pool. The
        watermark held them all along, as the start of a run of short sentences that could
        still become a pool (``streak.UnitRun``): every phrase is short, there are few, the
        run they are in is no longer than the pool's horizon, and none is structure."""
        cfg = self._cfg
        sentences = [s for s in _SENTENCE.findall(unit) if s.strip()]
        if len(sentences) < 2 or len(sentences) * math.ceil(copies) >= pool_horizon(cfg):
            return False  # one phrase alone is a cycle (its first copy is kept)
        if not _ENDS_SENTENCE.search(unit):
            return False  # the pool only counts sentences that end
        if self._structural and any(
            classify_line(line.strip()) is not LineKind.PROSE
            for line in unit.split("\n")
            if line.strip()
        ):
            return False
        phrases = set()
        for sentence in sentences:
            phrase = normalize_phrase(sentence)
            if not phrase or len(phrase) > HOLD_CHARS:
                return False  # only a run of very short phrases is held back as it comes
            phrases.add(phrase)
        return len(phrases) <= cfg.poolMaxPhrases

    def _number_changes(self, win: TextWindow, spans: list[tuple[int, int]]) -> int:
        """Most numbers that differ between the same line of consecutive copies, among the last
        few (their raw spans; a counter changes one or two per line, a log of measurements,
        many)."""
        numbers = self._copy_numbers
        return max(
            (numbers.changes(win, new, old) for old, new in pairwise(spans)),
            default=0,
        )

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
        batch = rule == "cycle" and not in_fence and self._phrase_batch(text, (end - onset) / unit)
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
        held = min(self._suffix_offset(win), self._digit_run_offset(win))
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

    def _suffix_offset(self, win: TextWindow) -> int:
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
            return win.raw_of(end - bound)

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
            and previous + _grown(folded, previous_end - win.fbase, e, previous_lag) >= broken_min
        ):
            # a run of two copies or more stopped recurring: the next checkpoint judges it
            start = win.raw_of(previous_end - previous)
            if self._broken_from is None or start < self._broken_from:
                self._broken_from = start
            self._broken_until = max(self._broken_until, end)
        if good < max(1, hold_min):
            return win.synced
        return win.raw_of(end - good)

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
            return _searched_suffix(folded, e, bound, self._max_period)
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
                    length = _tail_match(folded, e, end - j, 3, min(bound, at))
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


def repeat_hit(
    win: TextWindow,
    channel: Channel,
    rule: str,
    first: int,
    onset: int,
    unit: int,
    end: int,
    cp: int,
    text: str,
    whole: bool = False,
) -> Hit:
    """The hit for copies of ``unit`` folded chars from folded ``first`` (the kept copy from
    ``onset``) to ``end``: one copy kept, or, ``whole``, none (cut where its text begins)."""
    loop_start, copy_end = win.raw_of(onset), win.raw_of(onset + unit)
    prune = copy_end
    if whole:
        prune = loop_start = loop_start + len(text) - len(text.lstrip())
    return Hit(
        rule=rule,
        channel=channel,
        prune_offset=prune,
        loop_start=loop_start,
        fired_at=cp,
        repeats=round((end - first) / unit, 2),
        period=copy_end - loop_start,
        # (without the whitespace after it: how much of that is held when the rule fires
        # depends on how the text arrived, and a hit is the same in any chunking)
        evidence=excerpt(text.rstrip() or text),
    )


def hit_for(
    win: TextWindow, channel: Channel, rule: str, lag: int, end: int, cp: int, known: int
) -> Hit | None:
    """A hit for a repetition at folded ``lag`` that another rule confirmed ending at folded
    ``end`` (``known`` chars back already match): extended backwards, reduced to its primitive
    period, cut after one copy."""
    folded, base = win.folded, win.fbase
    b = end - base
    floor = max(0, end - win.keep - base)
    if b - lag - known < floor:
        return None
    length = _run_length(folded, b, lag, known, floor)
    first = end - length - lag
    unit = primitive_period(folded[first - base : b], lag)
    onset = _natural_start(win, first, unit, end)
    text = win.slice(win.raw_of(onset), win.raw_of(onset + unit))
    return repeat_hit(win, channel, rule, first, onset, unit, end, cp, text)


# Code repeats short lines (braces, blank comments, decorators, ``pass``) and blocks, and a long
# statement a few times (four identical layers of a model), but a long line of words written
# again and again, back to back, is no program: code that means it says so with a loop. Such a
# line needs half again a cycle's copies inside a fence, not codeFenceRepeatFactor times.
# 30 chars is about five words: SmolLM2 wrote ``json_data = json_data.to_json()`` 28 times
# (31 chars) and only three times the copies cut it; short statements (``pass``, ``i += 1``,
# ``print("Hello, World!")``, which a user may ask for many times) keep the full factor.
LONG_CODE_LINE: Final = 30
LONG_CODE_LINE_FACTOR: Final = 1.5


def _long_statement(unit: str, content: Content) -> bool:
    """One whole line (copies on one line are a run-on statement, judged like other code)."""
    line = unit.strip()
    return (
        content is Content.WORDS
        and unit.endswith("\n")
        and "\n" not in line
        and len(line) >= LONG_CODE_LINE
    )


_A_DIGIT: Final = re.compile(r"[0-9]")


def _fills(win: TextWindow, onset: int, end: int, raw_chars: int, least: int) -> bool:
    """Whether the copies from folded ``onset`` to ``end`` (``raw_chars`` raw chars) are
    ``least`` chars wide, a CJK char counted as two (``shape.text_width``)."""
    if raw_chars >= least:
        return True
    if 2 * raw_chars < least:
        return False
    return text_width(win.slice(win.raw_of(onset), win.raw_of(end))) >= least


def _same_item_renumbered(unit: str) -> bool:
    """One numbered list item whose content is gone: no number but its list number (``12.
    Banana``), or nothing but numbers (``12. 12. 1. 12``)."""
    body = numbered_item_body(unit)
    if body is None or "\n" in body.strip():
        return False
    return not numbers_of(body) or letters_in(body) == 0


def _content_gone(texts: list[str]) -> bool:
    """Renumbered items are degenerate when their text stays while the number moves on, or,
    for items of nothing but numbers, when some number stays (``12. 12. 1. 12``): ``12. 12``,
    all of whose numbers count, is a list of numbers someone asked for."""
    bodies = [numbered_item_body(t) or "" for t in texts]
    if len(bodies) < 3 or letters_in(bodies[-1]) or not numbers_of(bodies[-1]):
        return True
    rows = [numbers_of(b) for b in bodies]
    return any(len({row[k] for row in rows}) == 1 for k in range(min(map(len, rows))))


def _copy_spans(win: TextWindow, latest: int, unit: int, copies: int) -> list[tuple[int, int]]:
    """Raw spans of the last ``copies`` copies still held, oldest first."""
    oldest = max(latest - (copies - 1) * unit, latest - (latest - win.fbase) // unit * unit)
    bounds = [win.raw_of(s) for s in range(oldest, latest + unit + 1, unit)]
    return list(pairwise(bounds))


def _copy_texts(win: TextWindow, latest: int, unit: int, copies: int) -> list[str]:
    """Raw text of the last ``copies`` copies still held, oldest first."""
    return [win.slice(*span) for span in _copy_spans(win, latest, unit, copies)]


class _NumbersByLine:
    """The numbers of each line of a copy, and how many differ between two copies, remembered
    by the copies' raw spans: a run is judged at every checkpoint and looks at its last few
    copies each time, and held raw text never changes, so each copy is parsed once."""

    LIMIT = 256  # spans remembered; a run looks at six copies, a handful of runs at once

    def __init__(self) -> None:
        self._known: dict[tuple[int, int], list[list[str]]] = {}
        self._changes: dict[tuple[tuple[int, int], tuple[int, int]], int] = {}
        self._values: dict[tuple[int, int], list[int]] = {}

    def get(self, win: TextWindow, span: tuple[int, int]) -> list[list[str]]:
        lines = self._known.get(span)
        if lines is None:
            if len(self._known) >= self.LIMIT:
                self._known.clear()
            lines = self._known[span] = _line_numbers(win.slice(*span))
        return lines

    def values(self, win: TextWindow, span: tuple[int, int]) -> list[int]:
        """The copy's numbers in order, as integers."""
        values = self._values.get(span)
        if values is None:
            if len(self._values) >= self.LIMIT:
                self._values.clear()
            values = self._values[span] = [int(n) for line in self.get(win, span) for n in line]
        return values

    def changes(self, win: TextWindow, newer: tuple[int, int], older: tuple[int, int]) -> int:
        """Most numbers that differ between the same line of two copies."""
        key = (newer, older)
        worst = self._changes.get(key)
        if worst is None:
            if len(self._changes) >= self.LIMIT:
                self._changes.clear()
            worst = 0
            for new_line, old_line in zip(self.get(win, newer), self.get(win, older), strict=False):
                if new_line != old_line:
                    worst = max(worst, sum(map(ne, new_line, old_line)))
            self._changes[key] = worst
        return worst


def _line_numbers(text: str) -> list[list[str]]:
    return [numbers_of(line) for line in text.split("\n")]


def _after_line_break(raw: str, pos: int) -> bool:
    """Whether only spaces or tabs stand between the last line break and ``raw[pos]``."""
    j = pos - 1
    while j >= 0 and raw[j] in " \t":
        j -= 1
    return j >= 0 and raw[j] == "\n"


def _after_sentence_end(raw: str, pos: int) -> bool:
    """Whether ``raw[pos]`` starts a sentence: it follows 。！？, or .!? and whitespace."""
    if pos <= 0:
        return False
    if raw[pos - 1] in "。！？":
        return True
    j = pos - 1
    while j >= 0 and raw[j].isspace():
        j -= 1
    return j < pos - 1 and j >= 0 and raw[j] in ".!?"


def _natural_start(win: TextWindow, first: int, unit: int, end: int) -> int:
    """Folded offset of the kept copy's start, so the kept text ends on a clean boundary and the
    kept copy stays complete.

    The stretch start stays when the first copy begins a line. Otherwise the cut moves to where
    copies begin a line, as the most recent copy shows it (later copies show the loop's own
    layout, the first one shows what came before it), else stays at a sentence start, else
    moves to one, else to a clause start."""
    raw, base = win.raw, win.base
    lo = win.raw_of(first) - base
    if lo >= 0 and raw[lo : lo + 1] != "\n" and (lo + base == 0 or raw[lo - 1 : lo] == "\n"):
        return first  # (lo < 0: the first copy is no longer held, its context unknown)
    complete = (end - first) // unit
    # (copy start, where its held text stops), most telling first: a later complete copy, the
    # copy being written (a paragraph loop fires early in its second copy), the first copy
    layouts = []
    if complete >= 2:
        latest = first + (complete - 1) * unit
        layouts.append((latest, win.raw_of(latest + unit)))
    elif end - first > unit:
        layouts.append((first + unit, win.raw_of(end)))
    if lo >= 0:
        layouts.append((first, win.raw_of(first + unit)))
    for copy, stop in layouts:
        c_lo, c_hi = win.raw_of(copy) - base, stop - base
        if copy != first and raw[c_lo : c_lo + 1] != "\n" and _after_line_break(raw, c_lo):
            return first  # later copies begin a line (after its indentation)
        nl = raw.find("\n", c_lo, c_hi - 1)
        if nl >= 0:
            line = nl + 1
            while line < c_hi - 1 and raw[line] == "\n":
                line += 1  # a blank line is not where a copy begins
            return first + (win.folded_of(line + base) - copy)
    for copy, stop in layouts:
        c_lo, c_hi = win.raw_of(copy) - base, stop - base
        item = _ITEM_START.search(raw, c_lo, c_hi - 1)
        if item is not None:  # items of a numbered list run on one line
            return first + (win.folded_of(item.start() + base) - copy)
    if _after_sentence_end(raw, lo):
        return first
    for copy, stop in layouts:
        c_lo, c_hi = win.raw_of(copy) - base, stop - base
        for mark in _SENTENCE_MARKS:
            pos = raw.find(mark, c_lo, c_hi - 1)
            if pos >= 0:
                start = pos + len(mark)
                while start < c_hi - 1 and raw[start] == " ":
                    start += 1
                return first + (win.folded_of(start + base) - copy)
    for copy, stop in layouts:
        c_lo, c_hi = win.raw_of(copy) - base, stop - base
        clause = _CLAUSE_END.search(raw, c_lo, c_hi - 1)
        if clause is not None:  # a clause said again and again: whole clauses are kept
            return first + (win.folded_of(clause.end() + base) - copy)
    return first
