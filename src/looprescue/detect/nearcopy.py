"""Where a periodic loop really starts when its first copies were near-copies.

The periodic rules find where a loop repeats exactly. Real models often come into a loop
through near-copies first: the sentence with a clause appended (``It walked into the next room,
and then into the next room.``), a line with a word changed (``- Saturday: Day 8 (LUNCH)``
before a run of ``- Saturday: Lunch (LUNCH)``), or the loop's own lines in another order. Those
belong to the loop, and cutting after them keeps loop text in front of the user and in the
history. (The pool and lines rules count variants in already and place their onset where their
batch first appeared, so they are left as they are.)

So once a periodic rule has fired, the segments (lines, or sentences when the loop has no line
structure) right before its onset are walked back one by one, as long as each is a near-copy of
a segment of the loop: the same after folding numbers, case and whitespace; one the start of the
other; or, in prose, a word or two apart. A line may also hold the loop's sentences. The first
segment that is none of these stops the walk; nothing chains (a segment is compared with the
loop, never with another walked-over segment), so the walk cannot drift into text that merely
resembles what came before it. In code (fenced, or lines that read as code) only exact copies
count: lines that differ in one identifier are what code is made of. Before a ``cycle`` numbers
count too: its copies are the same text, numbers and all, so lines that are the same but for
their numbers (a log, table rows) are data that moved on until the model got stuck, not copies.
(A ``counter``'s copies differ in their numbers: they are folded for it.)

A short unit run on inside one sentence has no segments to compare with: the walk is over
copies of the unit instead, or over a run of another short unit that ends where it begins.

A segment that restates one the answer said before it (the same after folding, or a word or two
apart when it is long) is walked over too: a model that re-emits its earlier paragraphs or lines
out of order right before it settles on one is already looping (a first pass over three terms,
then the three again, then one clause on and on). This compares with the text, not the loop, so
it is held tighter: prose only, at least six tokens (a restated heading goes with the walk but
does not move the onset by itself), near-copies only of sixteen tokens or more (list lines a word
apart are how a list is written), and a segment said for the first time stops the walk, so the
answer's first pass stays. Before a cycle, a segment said before with one number moved on still
restates it (``Day 8`` after ``Day 5``); with more, it says something new (new measurements).

When the walk passed only exact copies, the earliest is the loop's first copy and is kept, as a
periodic loop's first copy always is; after near-copies nothing of the loop is kept. The walk is
pure: it reads the window the rule fired on, no further back than the text every chunking still
holds at that checkpoint. A stream may have released the near-copies already (no watermark
could hold them without holding all text): ``Hit.lead_in`` says how far the cut moved back, and
a consumer counts what it had released past the cut as leaked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from itertools import islice
from typing import Final

from looprescue.detect.buffer import TextWindow, fold
from looprescue.detect.hits import Hit
from looprescue.detect.shape import Content, content_of
from looprescue.detect.text import mask_digits

# Segments of the loop compared against (the first ones after its onset), and segments walked
# back at most: a loop's lead-in of near-copies is a handful of lines or sentences, and both
# bounds keep the work per hit small.
LOOP_SEGMENTS: Final = 64
MAX_WALK: Final = 256
# Units up to this long are looked for copy by copy before a run-on loop (a clause, a word),
# as long as copies are no further apart than DENSE_MAX_GAP chars and make up DENSE_COVERAGE
# of the text from the earliest one to the onset.
DENSE_MAX_UNIT: Final = 16
DENSE_MAX_GAP: Final = 24
DENSE_COVERAGE: Final = 0.6
# A run of another unit right before a run-on loop: its copies (back to back), and how far
# back it is looked for (a run of a short unit: a few dozen chars).
RUN_BEFORE_COPIES: Final = 3
RUN_BEFORE_CHARS: Final = 512
# Text before the onset split at first; most walks stop in it.
NEAR_ONSET_CHARS: Final = 512
# Rules that find a loop by its exact period: their onset is where the exact repetition
# begins, so near-copies before it are left to find. (A pool or lines rule counts variants
# in already and places its onset where its batch first appeared.)
PERIODIC_RULES: Final = frozenset({"cycle", "counter", "paragraph"})
# A word is a run of Latin letters; every other visible char (CJK, punctuation) is a token of
# its own, so "a word or two" means a char or two in CJK text.
_TOKEN: Final = re.compile(r"[A-Za-z\u00c0-\u024f]+|[0-9]+|\S")
# Code, fenced or not: lines that differ in one identifier are what code is made of, so only
# exact copies count there.
_CODE: Final = re.compile(
    r"^\s*(?:import|from|#include|#define|def|class|return|const|let|var|public|private|"
    r"static|function|fn|func|SELECT|INSERT|UPDATE|DELETE|CREATE)\b|[;{},]\s*$|\s=\s",
    re.MULTILINE,
)
_LINE: Final = re.compile(r"[^\n]*\n|[^\n]+$")
_SENTENCE: Final = re.compile(r"[^。！？\n]*?(?:[。！？]+|[.!?]+(?=\s|$)|\n|$)[ \t]*")
_END_MARKS: Final = frozenset(".。!！?？;；,，:：、")
# The shortest segment (in tokens) that may be "the start of the other", or differ in one or two
# tokens from it: shorter ones say too little to be called a copy.
PREFIX_MIN_TOKENS: Final = 6
# A segment walked over because it restates an earlier one (a paragraph or line the model
# re-emits out of order before it settles on one) must say this much; a shorter restated
# segment (a heading) is passed over but does not move the onset by itself.
RESTATED_MIN_TOKENS: Final = 6
# A restatement may differ in a word or two only when it is long: list lines a word apart
# (``- Monday: Run``, ``- Tuesday: Run``) are how a list is written, not a restatement.
RESTATED_NEAR_MIN_TOKENS: Final = 16
ONE_EDIT_MIN_TOKENS: Final = 6
# A segment said before with this many of its numbers changed still restates it (a counted
# line: ``Day 8`` after ``Day 5``); one with more changed says something new (measurements).
MOVED_NUMBERS: Final = 1
_DIGITS: Final = re.compile(r"[0-9]+")
TWO_EDITS_MIN_TOKENS: Final = 10


def extend_over_near_copies(
    win: TextWindow, hit: Hit, fenced: Callable[[int], bool], counter_moves: int = 2
) -> Hit:
    """``hit`` with its onset moved back over the near-copies right before it (and nothing of
    the loop kept), or ``hit`` itself when the segment before its onset is no near-copy.
    ``fenced(offset)`` tells whether a raw offset is inside a code fence; ``counter_moves``
    is how many numbers a counter's copies may change (``counterMaxChangingNumbers``)."""
    if hit.rule not in PERIODIC_RULES:
        return hit  # a pool or lines rule already found where its batch first appeared
    start = hit.loop_start
    floor = max(win.base, hit.fired_at - win.keep)
    if start <= floor:
        return hit
    loop_text = win.slice(start, hit.fired_at)
    by_lines = loop_text.count("\n") >= 2
    split = _LINE if by_lines else _SENTENCE
    in_loop = _segments(split, loop_text, LOOP_SEGMENTS + 1)
    if in_loop and (len(in_loop) > LOOP_SEGMENTS or not _complete(in_loop[-1], by_lines)):
        in_loop.pop()  # a segment cut off where the rule fired says less than it will
    # A cycle's copies are the same text, numbers and all: a segment before it that differs
    # in its numbers is data that moved on until the model got stuck (log lines, table rows),
    # no copy. A counter's copies differ in their numbers, so numbers are folded for it.
    numbers = hit.rule == "cycle"
    loop = [t for t in (_tokens(s, numbers) for s in in_loop) if t]
    if not loop:
        # one run-on segment (a short unit repeated inside a sentence that never ends): the
        # segments before it have nothing to be compared with, but the unit's copies do, and
        # so does a run of another short unit it took over from; failing both, the text right
        # before it may restate what the answer said already (below)
        dense = _extend_over_dense_copies(win, hit, floor, fenced)
        if dense is hit:
            dense = _extend_over_run_before(win, hit, floor, fenced)
        if dense is not hit:
            return dense
    exact = {tuple(t) for t in loop}
    # A counter's copies change a few numbers each: a line the same but for more of them (a
    # table row or a log line that moved on before the model got stuck) is data, no copy.
    counted: dict[tuple[str, ...], str] = {}
    if hit.rule == "counter":
        for segment in in_loop:
            counted.setdefault(tuple(_tokens(segment)), segment)
    # A line can hold several of the loop's sentences ("A。A。A。" before "A。⏎⏎A。⏎⏎"):
    # lines are then also compared sentence by sentence (tokenised when first needed).
    sentences: list[list[str]] = []

    before = win.slice(floor, start)
    # The onset may be inside a line, after a sentence: the start of that line is then judged
    # by its sentences alone. Anywhere else inside a segment, nothing before it is a copy.
    partial = bool(before) and not _ends_segment(before, by_lines)
    if partial and not (by_lines and _ends_segment(before, False)):
        return hit
    # The walk usually stops within a few segments: split only the text near the onset, from
    # a segment boundary, and all of it only if the walk gets there.
    tail_from = _boundary_before(before, len(before) - NEAR_ONSET_CHARS, by_lines)
    said = _Said(split, before)
    while True:
        segments = _segments(split, before[tail_from:])
        onset = offset = start
        copies_only = True  # every segment walked over is an exact copy of one of the loop's
        first_copy = 0  # length of the earliest segment walked over
        for walked, segment in enumerate(reversed(segments)):
            offset -= len(segment)
            if walked >= MAX_WALK or offset < floor:
                break
            tokens = _tokens(segment, numbers)
            if not tokens:
                continue  # a blank line goes with whatever is around it
            prose = not fenced(offset) and not _CODE.search(segment)
            whole = not (walked == 0 and partial)  # the segment is all there is of it
            if whole and tuple(tokens) in exact:
                like = counted.get(tuple(tokens))
                if like is not None and _numbers_apart(segment, like) > counter_moves:
                    break
                onset, first_copy = offset, len(segment)
                continue
            if whole and prose and _near_any(tokens, loop):
                onset, first_copy, copies_only = offset, len(segment), False
                continue
            if (
                whole
                and prose
                and said.before(
                    offset - floor,
                    _tokens(segment) if numbers else tokens,
                    segment if numbers else "",
                )
            ):
                # it restates what the answer said earlier: a restated segment of some length
                # leads into the loop, a short one (a heading said again) only goes with it
                if len(tokens) >= RESTATED_MIN_TOKENS:
                    onset, first_copy, copies_only = offset, len(segment), False
                continue
            if not (by_lines and prose):
                break
            # the line may hold the loop's sentences, or end in them
            tail, exact_tail, first = _trailing_near(
                segment, _loop_sentences(in_loop, sentences, numbers), numbers
            )
            if tail < len(segment):
                onset, first_copy = offset + tail, first
                copies_only = copies_only and exact_tail
            if tail > 0:
                break
        else:
            if tail_from:  # the walk went through the text split so far: split all of it
                tail_from = 0
                continue
        break
    if onset == start:
        return hit
    # The first copy is kept when what came before the run was exact copies (reshuffled);
    # after near-copies nothing of the loop is.
    keep = first_copy if copies_only else 0
    return _moved_back(hit, onset, min(onset + keep, hit.prune_offset))


class _Said:
    """The segments of the text before a loop, for asking whether one restates an earlier one
    (the same after folding, or, for a long one, a near-copy of one). Split on first use: most
    walks stop before they need it."""

    def __init__(self, split: re.Pattern[str], text: str) -> None:
        self._split, self._text = split, text
        self._first: dict[tuple[str, ...], int] | None = None
        # the parts said, by their tokens (numbers folded), where and as they were said
        self._said: dict[tuple[str, ...], list[tuple[int, str]]] = {}
        self._by_length: dict[int, list[tuple[int, list[str]]]] = {}

    def before(self, offset: int, tokens: list[str], raw: str) -> bool:
        """Whether a segment of ``tokens`` was said before ``offset`` (of the text); given its
        ``raw`` text, said with at most ``MOVED_NUMBERS`` of its numbers otherwise (a counted
        line, ``Day 8`` after ``Day 5``, restates it; a log line with new measurements does
        not)."""
        if self._first is None:
            self._index()
        assert self._first is not None
        key = tuple(tokens)
        first = self._first.get(key)
        if first is not None and first < offset:
            if not raw:
                return True
            for at, part in self._said[key]:
                if at >= offset:
                    break
                if _numbers_apart(raw, part) <= MOVED_NUMBERS:
                    return True
        if len(tokens) < RESTATED_NEAR_MIN_TOKENS:
            return False
        for length in range(len(tokens) - 2, len(tokens) + 3):
            for at, other in self._by_length.get(length, ()):
                if at >= offset:
                    break
                if _near(tokens, other):
                    return True
        return False

    def _index(self) -> None:
        first: dict[tuple[str, ...], int] = {}
        at = 0
        for segment in _segments(self._split, self._text):
            # a line's sentences each count as said too (a sentence said again on a line of
            # its own, without the question it followed)
            parts = _segments(_SENTENCE, segment) if self._split is _LINE else [segment]
            for part in parts if len(parts) > 1 else [segment]:
                tokens = _tokens(part)
                if tokens:
                    first.setdefault(tuple(tokens), at)
                    self._said.setdefault(tuple(tokens), []).append((at, part))
                    self._by_length.setdefault(len(tokens), []).append((at, tokens))
            at += len(segment)
        self._first = first


def _numbers_apart(a: str, b: str) -> int:
    """How many numbers differ between two texts whose tokens agree once numbers are folded."""
    return sum(x != y for x, y in zip(_DIGITS.findall(a), _DIGITS.findall(b), strict=False))


def _moved_back(hit: Hit, onset: int, prune: int) -> Hit:
    """``hit`` with its loop starting at ``onset`` and cut at ``prune``; what lies between the
    new cut and the rule's own is its lead-in (a stream may have shown it already)."""
    return replace(
        hit, loop_start=onset, prune_offset=prune, lead_in=hit.lead_in + hit.prune_offset - prune
    )


def _extend_over_dense_copies(
    win: TextWindow, hit: Hit, floor: int, fenced: Callable[[int], bool]
) -> Hit:
    """``hit`` with its onset moved back to the earliest copy of its short unit from which
    copies make up most (``DENSE_COVERAGE``) of the text up to the onset: a clause a model came
    back to a few times a sentence before it got stuck on it (``用于表示一个系统，`` four times,
    the sentence again, then the clause a hundred times). The copies are looked for back to the
    first gap of more than ``DENSE_MAX_GAP`` chars. Nothing of the loop is then kept."""
    period = hit.period or 0
    start = hit.loop_start
    if hit.rule != "cycle" or not 0 < period <= DENSE_MAX_UNIT or fenced(start):
        return hit  # (a counter's copies differ in their numbers: no copy reads like another)
    unit = win.slice(start, start + period)
    before = win.slice(floor, start)
    if not unit.strip() or not before:
        return hit
    onset = cursor = len(before)  # cursor: where the last copy found begins
    copies = 0
    # one char recurs anywhere (the 1s of 112 before 1111…): only back to back copies count
    max_gap = DENSE_MAX_GAP if period > 1 else 0
    while True:
        at = before.rfind(unit, 0, cursor)
        if at < 0 or cursor - at - period > max_gap:
            break
        copies += period
        cursor = at
        if copies >= DENSE_COVERAGE * (len(before) - at):
            onset = at
    if onset == len(before):
        return hit
    return _moved_back(hit, floor + onset, min(floor + onset, hit.prune_offset))


def _extend_over_run_before(
    win: TextWindow, hit: Hit, floor: int, fenced: Callable[[int], bool]
) -> Hit:
    """``hit`` with its onset moved back over a run of another short unit of words that ends
    where the loop begins (``编程语言的`` nine times, then ``；`` on and on): the model got stuck on
    one unit, then on the next, one degeneration. The run needs ``RUN_BEFORE_COPIES`` copies
    back to back; its first copy is kept, as a periodic loop's is."""
    period = hit.period or 0
    start = hit.loop_start
    if hit.rule != "cycle" or not 0 < period <= DENSE_MAX_UNIT or fenced(start):
        return hit
    before = win.slice(max(floor, start - RUN_BEFORE_CHARS), start)
    for unit in range(2, DENSE_MAX_UNIT + 1):
        if len(before) < RUN_BEFORE_COPIES * unit:
            break
        copy = before[-unit:]
        if (
            content_of(copy) is not Content.WORDS
            or before[-RUN_BEFORE_COPIES * unit :] != copy * RUN_BEFORE_COPIES
        ):
            continue
        at = len(before) - RUN_BEFORE_COPIES * unit
        while at >= unit and before[at - unit : at] == copy:
            at -= unit
        while at > 0 and before[at - 1] == before[at - 1 + unit]:
            at -= 1  # the run may begin inside a copy (its last copy is cut short by the loop)
        onset = start - (len(before) - at)
        return _moved_back(hit, onset, min(onset + unit, hit.prune_offset))
    return hit


def _boundary_before(text: str, pos: int, by_lines: bool) -> int:
    """An offset at or before ``pos`` where a segment of the split begins (0 when there is
    none): after a line break, and for sentences after the spaces or tabs that follow it."""
    nl = text.rfind("\n", 0, pos) if pos > 0 else -1
    if nl < 0:
        return 0
    at = nl + 1
    if not by_lines:
        while at < len(text) and text[at] in " \t":
            at += 1
    return at


def _segments(split: re.Pattern[str], text: str, most: int | None = None) -> list[str]:
    """The segments of ``text`` (the first ``most`` of them, when given)."""
    found = (m.group() for m in split.finditer(text) if m.group())
    return list(found if most is None else islice(found, most))


def _complete(segment: str, by_lines: bool) -> bool:
    if by_lines:
        return segment.endswith("\n")
    return segment.rstrip()[-1:] in ("。", "！", "？", ".", "!", "?", "")


def _ends_segment(text: str, by_lines: bool) -> bool:
    tail = text.rstrip(" \t")
    if not tail:
        return True
    if by_lines:
        return tail.endswith("\n")
    return tail[-1] in "\n。！？" or (tail[-1] in ".!?" and len(tail) < len(text))


def _tokens(segment: str, numbers: bool = False) -> list[str]:
    """The segment's words, numbers and marks; numbers folded to one unless ``numbers``."""
    tokens = _TOKEN.findall((segment if numbers else fold(segment)).casefold())
    while tokens and tokens[-1] in _END_MARKS:
        tokens.pop()
    return tokens


def _near_any(tokens: list[str], loop: list[list[str]]) -> bool:
    return any(_near(tokens, t) for t in loop)


def _loop_sentences(in_loop: list[str], found: list[list[str]], numbers: bool) -> list[list[str]]:
    """The loop's segments as tokenised sentences, worked out on first use into ``found``. (A
    helper, not a closure: compiled, a closure and its frame would hold each other.)"""
    if not found:
        for segment in in_loop:
            for sentence in _segments(_SENTENCE, segment):
                tokens = _tokens(sentence, numbers)
                if tokens:
                    found.append(tokens)
    return found


def _trailing_near(line: str, sentences: list[list[str]], numbers: bool) -> tuple[int, bool, int]:
    """Where the run of the loop's sentences that ``line`` ends in begins (``len(line)`` when
    its last sentence is none of them), whether they are all exact copies, and the length of
    the first."""
    known = {tuple(t) for t in sentences}
    start, exact, first = len(line), True, 0
    for part in reversed(_segments(_SENTENCE, line)):
        tokens = _tokens(part, numbers)
        if tokens and not _near_any(tokens, sentences):
            break
        start -= len(part)
        if tokens:
            exact, first = exact and tuple(tokens) in known, len(part)
    if start >= len(line.rstrip("\n")):
        return len(line), True, 0
    return start, exact, first


def _near(a: list[str], b: list[str]) -> bool:
    """Whether two segments are near-copies: one the start of the other, or a word or two
    apart (edit distance in tokens)."""
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    n = len(short)
    if n >= PREFIX_MIN_TOKENS and long[:n] == short:
        return True
    allowed = 2 if n >= TWO_EDITS_MIN_TOKENS else 1 if n >= ONE_EDIT_MIN_TOKENS else 0
    if not allowed or len(long) - n > allowed:
        return False
    return edit_distance_within(short, long, allowed)


def edit_distance_within(a: list[str], b: list[str], bound: int) -> bool:
    """Whether the token edit distance of ``a`` and ``b`` is at most ``bound`` (banded)."""
    return edit_distance_up_to(a, b, bound) <= bound


def edit_distance_up_to(a: list[str], b: list[str], bound: int) -> int:
    """The token edit distance of ``a`` and ``b``, or ``bound + 1`` when it is more than
    ``bound`` (banded: the cost grows with ``bound``, not with the lengths squared)."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    previous = list(range(len(b) + 1))
    for i, token in enumerate(a, 1):
        lo, hi = max(1, i - bound), min(len(b), i + bound)
        current = [bound + 1] * (len(b) + 1)
        current[0] = i if i <= bound else bound + 1
        for j in range(lo, hi + 1):
            current[j] = min(
                previous[j] + 1,
                current[j - 1] + 1,
                previous[j - 1] + (token != b[j - 1]),
            )
        if min(current) > bound:
            return bound + 1
        previous = current
    return min(previous[len(b)], bound + 1)


# How far before a cut the lines that lead a copy are looked for (a heading or two).
HEADING_LOOKBACK: Final = 400
_A_DIGIT: Final = re.compile(r"[0-9]")


def with_renumbered_heading(win: TextWindow, hit: Hit) -> Hit:
    """``hit`` with its cut moved back over the lines right before it that a later copy of the
    loop holds with one number moved on (``### Step 3`` before a block first said under ``###
    Step 2``): a block said again under a new heading begins at the heading. A pool cut where its
    repeats began keeps the heading of the copy it cuts otherwise. Lines said the same (the
    first copy's own) stop the walk, as does any other line."""
    cut = hit.prune_offset
    lo = max(win.base, cut - HEADING_LOOKBACK)
    before = win.slice(lo, cut)
    if not before.endswith("\n"):
        return hit  # the cut is inside a line
    loop_lines = [line.strip() for line in win.slice(cut, hit.fired_at).split("\n")]
    said = {line for line in loop_lines if line}
    renumbered: dict[str, list[str]] = {}
    for line in said:
        if _A_DIGIT.search(line):
            renumbered.setdefault(mask_digits(line), []).append(line)
    onset = cut
    pos = len(before) - 1  # the newline that ends the line before the cut
    for line in reversed(before[:-1].split("\n")):
        start = pos - len(line)
        pos = start - 1
        text = line.strip()
        if not text:
            continue
        if text in said:
            break
        # renumbered: the loop holds it with one number moved on (``### Step 3``); a line
        # with more moved on is a row of data the loop's own row happens to look like
        like = renumbered.get(mask_digits(text), ())
        if not any(_numbers_apart(text, other) <= MOVED_NUMBERS for other in like):
            break
        onset = lo + start + len(line) - len(line.lstrip())
    if onset == cut:
        return hit
    return _moved_back(hit, onset, onset)
