"""What a repeated unit is, and how many copies of it make a loop: the periodic rules' shape policy.

A unit is one copy of a periodic run of the folded text. Its shape decides how many copies make
its repetition a loop before any copy is counted (``copies_needed``, the table in
docs/detector.md): layout never, a short phrase at ``cycleShortRepeats``, a block of lines at
``cycleBlockRepeats``, a clause at ``cycleClauseRepeats``, numbers and marks at twice the
copies, code in a fence at ``codeFenceRepeatFactor`` times. Every fact is read with digits as
"a digit" (``UnitFacts``), so copies that differ in their numbers share them, and a counter is
told from a cycle by the numbers of its last few copies (``NumbersByLine``).

Where a unit starts (``natural_start``): the copies are cut on a clean boundary, a line start as
the latest copy shows it, else a numbered item, a sentence start or a clause start inside the
first copy, so the kept copy is whole. ``repeat_hit`` makes the hit that keeps one copy.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from itertools import pairwise
from operator import ne
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.period import primitive_period, run_length
from looprescue.detect.shape import (
    CLAUSE_MARKS,
    Content,
    is_letter,
    is_one_clause,
    numbers_of,
    text_width,
    units_in,
)
from looprescue.detect.text import excerpt

_SENTENCE_MARKS: Final = ("。", "！", "？", ". ", "! ", "? ")
# Where a numbered item begins inside a line: "…，13. 从…", "… 4) Then…".
_ITEM_START: Final = re.compile(r"(?<![0-9])[0-9]{1,4}[.)、] ?(?=[^\s0-9])")
_CLAUSE_END: Final = re.compile(f"[{CLAUSE_MARKS}] *")


@dataclass(slots=True, frozen=True)
class UnitFacts:
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


def copies_needed(cfg: DetectorConfig, unit: str, content: Content) -> float:
    """Copies of a unit (raw text of one copy) that make its repetition a loop."""
    size = len(unit)
    # numbers and marks are data or emphasis more often than words are: twice the copies; a
    # number and a row's separator are a row of data (``1、1、1、…`` for f(0) to f(20), a DP
    # table's ``1  1  1``, a matrix of zeros): four times. (A number and a full stop, ``1. 1.
    # 1.``, is a list number chanted: a small model's loop; digits run together, ``1212``, a
    # chant of digits.)
    if content is Content.WORDS or (content is Content.DIGITS and unit.isdigit()):
        doubt = 1.0
    else:
        doubt = 4.0 if _a_row(unit) else 2.0
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


# What separates the values of a row of data: a comma, a semicolon, an enumeration comma.
_ROW_SEPARATORS: Final = frozenset(",，、;； \t")


def _a_row(unit: str) -> bool:
    """Whether a unit of numbers and marks is one value of a row: besides its digits, only
    what separates values (``1、``, ``0, ``, ``1  ``)."""
    return all(c.isdigit() or c in _ROW_SEPARATORS for c in unit)


# Code repeats short lines (braces, blank comments, decorators, ``pass``) and blocks, and a long
# statement a few times (four identical layers of a model), but a long line of words written
# again and again, back to back, is no program: code that means it says so with a loop. Such a
# line needs half again a cycle's copies inside a fence, not codeFenceRepeatFactor times.
# 30 chars is about five words: SmolLM2 wrote ``json_data = json_data.to_json()`` 28 times
# (31 chars) and only three times the copies cut it; short statements (``pass``, ``i += 1``,
# ``print("Hello, World!")``, which a user may ask for many times) keep the full factor.
LONG_CODE_LINE: Final = 30
LONG_CODE_LINE_FACTOR: Final = 1.5


def long_statement(unit: str, content: Content) -> bool:
    """One whole line (copies on one line are a run-on statement, judged like other code)."""
    line = unit.strip()
    return (
        content is Content.WORDS
        and unit.endswith("\n")
        and "\n" not in line
        and len(line) >= LONG_CODE_LINE
    )


A_DIGIT: Final = re.compile(r"[0-9]")


def fills(win: TextWindow, onset: int, end: int, raw_chars: int, least: int) -> bool:
    """Whether the copies from folded ``onset`` to ``end`` (``raw_chars`` raw chars) are
    ``least`` chars wide, a CJK char counted as two (``shape.text_width``)."""
    if raw_chars >= least:
        return True
    if 2 * raw_chars < least:
        return False
    return text_width(win.slice(win.raw_of(onset), win.raw_of(end))) >= least


def copy_spans(win: TextWindow, latest: int, unit: int, copies: int) -> list[tuple[int, int]]:
    """Raw spans of the last ``copies`` copies still held, oldest first."""
    oldest = max(latest - (copies - 1) * unit, latest - (latest - win.fbase) // unit * unit)
    bounds = [win.raw_of(s) for s in range(oldest, latest + unit + 1, unit)]
    return list(pairwise(bounds))


def copy_texts(win: TextWindow, latest: int, unit: int, copies: int) -> list[str]:
    """Raw text of the last ``copies`` copies still held, oldest first."""
    return [win.slice(*span) for span in copy_spans(win, latest, unit, copies)]


class NumbersByLine:
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


def number_changes(numbers: NumbersByLine, win: TextWindow, spans: list[tuple[int, int]]) -> int:
    """Most numbers that differ between the same line of consecutive copies, among the last
    few (their raw spans; a counter changes one or two per line, a log of measurements,
    many)."""
    return max(
        (numbers.changes(win, new, old) for old, new in pairwise(spans)),
        default=0,
    )


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


def natural_start(win: TextWindow, first: int, unit: int, end: int) -> int:
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
    length = run_length(folded, b, lag, known, floor)
    first = end - length - lag
    unit = primitive_period(folded[first - base : b], lag)
    onset = natural_start(win, first, unit, end)
    text = win.slice(win.raw_of(onset), win.raw_of(onset + unit))
    return repeat_hit(win, channel, rule, first, onset, unit, end, cp, text)
