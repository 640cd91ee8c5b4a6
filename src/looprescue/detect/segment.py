"""Splits a channel's text into sentences and lines as it arrives, and tracks line context.

Boundaries are only decided once the char after them is known (an English ``.`` ends a
sentence only before whitespace), so the same text gives the same units in any chunking.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable
from typing import Final, Protocol

from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Hit
from looprescue.detect.limits import LONG_UNIT
from looprescue.detect.shape import is_table_row
from looprescue.detect.text import (
    LONG_SENTENCE,
    SENTENCE_END,
    STRUCTURE_LINE,
    LineKind,
    classify_line,
    has_alnum,
)

# Units that the phrase and line rules never count in the visible-text channel: their
# repetition is structure (lists, tables, quotes, code), not a loop.
_STRUCTURAL: Final = frozenset(
    {LineKind.LIST_ITEM, LineKind.TABLE_ROW, LineKind.QUOTE, LineKind.FENCE, LineKind.SYMBOLS}
)
# Lines no line rule counts. (Members bound once: an Enum member lookup costs a descriptor
# call on every line.)
# Recent lines of structure remembered to tell a new one from one said again.
STRUCTURE_MEMORY: Final = 64
_NOT_COUNTED: Final = frozenset({LineKind.BLANK, LineKind.SYMBOLS, LineKind.FENCE})
_PROSE, _TABLE_ROW, _FENCE = LineKind.PROSE, LineKind.TABLE_ROW, LineKind.FENCE
_LIST_ITEM = LineKind.LIST_ITEM

SentenceSink = Callable[[str, int, int], Hit | None]
LineSink = Callable[[str, int, int], Hit | None]
LineStartSink = Callable[[int], None]
# every unit (sentence or line) with its raw span, whatever its context
UnitSink = Callable[[TextWindow, int, int], Hit | None]
# the sentence being written: its start and the offset scanned up to
OpenSentenceSink = Callable[[TextWindow, int, int], Hit | None]


class CodeSink(Protocol):
    def on_code_line(self, line: str, start: int, end: int) -> Hit | None: ...

    def end_fence(self, end: int) -> None: ...


class ItemSink(Protocol):
    def on_item(self, line: str, start: int, end: int) -> Hit | None: ...


class TableSink(Protocol):
    def on_row(self, row: str, start: int, end: int) -> Hit | None: ...

    def end_table(self) -> None: ...


# Which feed's hit wins when several end at one boundary: a sentence's feeds before its line's,
# and among them in this order (a rule's registry place follows it, ``detect.registry``).
FEED_ORDER: Final = ("unit", "clauses", "sentence", "code_line", "item", "row", "line")


def ends_in_fence(text: str) -> bool:
    """Whether ``text`` ends inside a ``` fence: an odd number of its lines are fence lines
    (its last line counts though unended: a cut falls at a line's start, or in a line
    that goes on)."""
    fenced = False
    for line in text.split("\n"):
        if classify_line(line.strip()) is _FENCE:
            fenced = not fenced
    return fenced


class Segmenter:
    def __init__(
        self,
        structural_text: bool,
        on_sentence: SentenceSink | None = None,
        on_line: LineSink | None = None,
        on_line_start: LineStartSink | None = None,
        long_sentence: int = LONG_UNIT,
        table: TableSink | None = None,
        code: CodeSink | None = None,
        on_clauses: SentenceSink | None = None,
        on_unit: UnitSink | None = None,
        on_open_sentence: OpenSentenceSink | None = None,
        items: ItemSink | None = None,
        in_fence: bool = False,
    ) -> None:
        # in_fence: the text goes on from inside a ``` fence (a continuation of an answer
        # cut in a code block: its closing fence line must close it, not open one)
        # structural_text: apply the visible-text guards (lists, tables, quotes); a fence is
        # code in either channel (``_is_structure``)
        self._structural = structural_text
        self._on_sentence = on_sentence
        self._on_line = on_line
        self._on_line_start = on_line_start
        self._table = table
        self._code = code  # gets the lines inside ``` fences
        self._items = items  # gets the numbered list lines outside fences
        self._long_sentence = min(long_sentence, LONG_UNIT)
        # gets every sentence's text up to LONG_UNIT, before on_sentence (a rule that looks
        # inside a sentence, whatever its length as a phrase)
        self._on_clauses = on_clauses
        self._on_unit = on_unit
        # gets the unfinished sentence after each scan (a rule that need not wait for its end)
        self._on_open_sentence = on_open_sentence
        self.sentence_from = 0  # offset after the last sentence boundary
        # recent lines of structure, to tell a new one from one said again (bounded)
        self._structure_seen: dict[str, None] = {}
        self._structure_sorted: list[str] = []  # the same lines in order, to find a prefix fast
        self.line_from = 0  # offset after the last newline
        self._line_kind: LineKind | None = None
        self.in_fence = in_fence
        # Offsets where a fence line ended (the state flips there), for asking later whether
        # some offset was fenced; marks older than the window are folded into a parity.
        self._fence_marks: list[int] = []
        self._fence_parity = 1 if in_fence else 0
        self.scanned = 0  # offset up to which boundaries have been processed
        if on_line_start is not None and not in_fence:
            on_line_start(0)

    def scan_to(self, win: TextWindow, stop: int, final: bool = False) -> Hit | None:
        """Process the boundaries that end at or before ``stop``.

        The char at ``stop`` must have arrived (an English ``.`` just before it needs it),
        unless ``final``: then the text ends at ``stop`` and that is a boundary too."""
        raw, base = win.raw, win.base
        start, self.scanned = self.scanned, max(self.scanned, stop)
        if stop <= start:
            return None
        if not final and win.last_mark < start:
            # no sentence end char came since the last scan (the watermark scans a delta or
            # two at a time, and most hold none)
            return None
        for match in SENTENCE_END.finditer(raw, start - base, stop - base + (0 if final else 1)):
            pos = match.start()
            if pos + base >= stop:
                break
            hit = self._boundary(win, pos + base + 1, raw[pos] == "\n")
            if hit is not None:
                return hit
        if final and stop > self.sentence_from:
            return self._boundary(win, stop, True)
        if self._on_open_sentence is not None and stop > self.sentence_from:
            hit = self._on_open_sentence(win, self.sentence_from, stop)
            if hit is not None and self._open_counts(win, hit.fired_at):
                return hit
        return None

    def _open_kind(self, win: TextWindow, upto: int) -> LineKind:
        """The kind of the unfinished line, read up to ``upto`` (the same text whatever the
        chunking); caches nothing, so asking at any point never changes a decision."""
        if upto - self.line_from > LONG_UNIT:
            return _PROSE  # (a line this long is prose, as _line_kind_at has it)
        return classify_line(win.slice(self.line_from, upto).strip())

    def _open_counts(self, win: TextWindow, upto: int) -> bool:
        """Whether the unfinished sentence, up to ``upto``, is prose a sentence rule judges."""
        return not self.in_fence and not self._is_structure(self._open_kind(win, upto))

    def open_line_counts(self, win: TextWindow, end: int) -> bool:
        """Whether the line being written (up to ``end``) reaches ``on_line`` as a unit when it
        ends: a prose line (in visible text, also outside fences, and no list item, table row
        or quote). Asked of a line long enough that its first chars settle its kind."""
        kind = self._open_kind(win, end)
        if kind in _NOT_COUNTED:
            return False
        return not self._is_structure(kind)

    def open_sentence_counts(self, win: TextWindow, end: int) -> bool:
        """Whether the sentence being written (up to ``end``) reaches ``on_sentence`` as a unit
        when it ends: as ``_open_counts``, but by the line's kind as the segmenter already
        judged it when it has (that is what decides). Asked of a sentence long enough that its
        line's first chars settle the kind."""
        kind = self._line_kind
        if kind is None:
            return self._open_counts(win, end)
        return not self._is_structure(kind)

    def open_structure_is_new(self, win: TextWindow, end: int) -> bool:
        """Whether the line being written (up to ``end``) reaches the sentence and line rules
        as a new ``STRUCTURE_LINE`` when it ends: a list item, table row or quote that begins
        like no remembered one, or any line of code in a fence. Asked of a line long enough
        that its first chars settle its kind; by the kind the segmenter already judged when it
        has (a line it read as prose hands its sentences on as it goes, and is no structure
        line to them)."""
        kind = self._line_kind if self._line_kind is not None else self._open_kind(win, end)
        if kind in _NOT_COUNTED or not self._is_structure(kind):
            return False
        if self.in_fence:
            return True  # a line of code is a unit between the run's, said before or not
        head = win.slice(self.line_from, end).strip()
        ordered = self._structure_sorted
        at = bisect_left(ordered, head)
        return not (at < len(ordered) and ordered[at].startswith(head))

    def _line_kind_at(self, win: TextWindow, upto: int) -> LineKind:
        if self._line_kind is None:
            if upto - self.line_from > LONG_UNIT:
                self._line_kind = _PROSE
            else:
                self._line_kind = classify_line(win.slice(self.line_from, upto).strip())
        return self._line_kind

    def _boundary(self, win: TextWindow, end: int, newline: bool) -> Hit | None:
        begin = self.sentence_from
        self.sentence_from = end
        hit = self._on_unit(win, begin, end) if self._on_unit is not None else None
        if end - begin > self._long_sentence:
            # Far longer than any phrase: judged by its length alone (most sentences are).
            if self._counts_in_context(win, end):
                if self._on_clauses is not None and end - begin <= LONG_UNIT:
                    hit = hit or self._clauses(win, begin, end)
                if self._on_sentence is not None:
                    hit = hit or self._on_sentence(LONG_SENTENCE, begin, end)
        elif end - begin > 1 or not newline:  # a lone newline after a full stop is no sentence
            base = win.base
            raw_sentence = win.raw[begin - base : end - base]
            text = raw_sentence.strip()
            if text and has_alnum(text) and self._counts_in_context(win, end):
                start = begin + len(raw_sentence) - len(raw_sentence.lstrip())
                if self._on_clauses is not None:
                    hit = hit or self._on_clauses(text, start, end)
                if self._on_sentence is not None:
                    hit = hit or self._on_sentence(text, start, end)
        if newline:
            line_hit = self._end_line(win, end)
            hit = hit or line_hit
        return hit

    def _new_structure(self, line: str) -> bool:
        if not has_alnum(line):
            return False
        seen = self._structure_seen
        if line in seen:
            return False
        seen[line] = None
        insort(self._structure_sorted, line)
        if len(seen) > STRUCTURE_MEMORY:
            oldest = next(iter(seen))
            del seen[oldest]
            del self._structure_sorted[bisect_left(self._structure_sorted, oldest)]
        return True

    def _clauses(self, win: TextWindow, begin: int, end: int) -> Hit | None:
        assert self._on_clauses is not None
        raw_sentence = win.slice(begin, end)
        text = raw_sentence.strip()
        if not text:
            return None
        return self._on_clauses(text, begin + len(raw_sentence) - len(raw_sentence.lstrip()), end)

    def _counts_in_context(self, win: TextWindow, end: int) -> bool:
        return not self.in_fence and not self._is_structure(self._line_kind_at(win, end))

    def _is_structure(self, kind: LineKind) -> bool:
        """Whether a line of ``kind`` is structure here, no prose unit: a fence line or a line
        of code inside a fence in either channel (a model drafts code in its reasoning as in
        its answer), a list item, table row or quote in the visible text only (reasoning
        lists its thoughts)."""
        return self.in_fence or kind is _FENCE or (self._structural and kind in _STRUCTURAL)

    def _end_line(self, win: TextWindow, end: int) -> Hit | None:
        line_from = max(self.line_from, end - 1 - LONG_UNIT)
        raw_line = win.slice(line_from, end - 1)
        line = raw_line.strip()
        clipped = line_from != self.line_from
        if not clipped:
            kind = classify_line(line)
        elif self._structural and self._line_kind in _STRUCTURAL:
            # too long to read again: the kind its sentences were judged by (they were not
            # counted, so it must reach the rules as the structure line it is)
            kind = self._line_kind
        else:
            kind = _PROSE
        hit = None
        counted = kind not in _NOT_COUNTED and not self._is_structure(kind)
        start = line_from + len(raw_line) - len(raw_line.lstrip())
        if counted and self._on_line is not None:
            hit = self._on_line(line, start, end)
        elif (
            not counted
            and kind not in _NOT_COUNTED
            and (clipped or self.in_fence or self._new_structure(line))
        ):
            # A new line of structure with words in it (a list item, a table row): no unit of
            # the phrase and line rules, but it comes between the units of the run they hold
            # back (a heading, then a list), and a long one ends that run. One said again is
            # loop-like: it breaks nothing. A clipped line is new by its length alone, and a
            # line of code always counts (code repeats lines: old and new versions of it).
            if self._on_sentence is not None:
                hit = self._on_sentence(STRUCTURE_LINE, start, end) or hit
            if self._on_line is not None:
                hit = self._on_line(STRUCTURE_LINE, start, end) or hit
        if self._table is not None:
            if kind is _TABLE_ROW and not clipped and line.endswith("|") and not self.in_fence:
                hit = self._table.on_row(line, start, end) or hit
            else:
                self._table.end_table()
        if (
            (kind is _LIST_ITEM or kind is _PROSE)
            and not clipped
            and self._items is not None
            and not self.in_fence
        ):
            # (a Chinese list numbers its items in marks a line of prose may open with too)
            hit = self._items.on_item(line, start, end) or hit
        if kind is _FENCE:
            if self._code is not None:
                self._code.end_fence(end)
            self.in_fence = not self.in_fence
            self._fence_marks.append(end)
        elif self.in_fence and self._code is not None:
            hit = self._code.on_code_line(line, start, end) or hit
        self.line_from = end
        self._line_kind = None
        if self._on_line_start is not None and not self.in_fence:
            self._on_line_start(end)
        return hit

    def fenced(self, offset: int) -> bool:
        """Whether the char at ``offset`` (already scanned) lies inside a ``` fence."""
        return (bisect_right(self._fence_marks, offset) + self._fence_parity) % 2 == 1

    def code_or_table(self, stripped: str, start: int) -> bool:
        """Whether a line (stripped, not blank) that begins at ``start`` is code or a table:
        inside a fence, a fence line, or a table row. Rules that compare whole lines leave
        them: lines alike are how code and tables are written."""
        return (
            self.fenced(start)
            or stripped.startswith("```")
            or (stripped[0] == "|" and is_table_row(stripped))
        )

    def fence_open_since(self, offset: int) -> bool:
        """Whether the char at ``offset`` lies inside a ``` fence that no line scanned since
        has closed: all text from ``offset`` on is code."""
        marks = self._fence_marks
        return self.in_fence and (not marks or marks[-1] <= offset)

    def forget_fences_before(self, offset: int) -> None:
        marks = self._fence_marks
        if not marks or marks[0] > offset:
            return  # (asked after every delta: mostly nothing to forget)
        drop = bisect_right(marks, offset)
        if drop:
            self._fence_parity = (self._fence_parity + drop) % 2
            del self._fence_marks[:drop]
