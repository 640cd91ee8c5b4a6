"""Rule ``restate``: a continuation's answer writes out again what the client already has.

A continuation is sent after a cut with the answer shown so far (the client has it) and a
correction asking to go on from there. A model that writes that answer again instead, from its
first sentence (a restart) or a block of it, shows the user the same text twice, and the copy
goes into the conversation's history, where the model re-reads it: the repetition goes on
across the cut. A small model does this often (SmolLM2 rewrites the whole email it was cut in,
or a code block it had shown twice already); a strong one seldom, but it is the same loop.

What counts is a *unit*, a sentence or line as the segmenter cuts them, with its whitespace
folded, of at least ``RESTATED_MIN_WIDTH`` (a char of a script written without spaces counted
twice): shorter units (``Best regards,``, ``}``, a heading word) recur in honest text.

* A unit of the loop's own kept copy said again is the loop resuming: one is enough.
* The continuation's first unit that says something (blank, fence and short lines aside),
  restated, is a restart. A model often picks up by restating where it stopped, so when that
  unit is the last one of the shown answer, the unit after it decides.
* Later on, two restated units in a row (shorter units between them aside) are a block said
  again; one is a quotation.

A unit is restated when it is one of the shown answer's, or a near copy: every letter and digit
of it is inside a piece the client already has, a piece at least ``PIECE_WIDTH`` wide. A small
model restating joins the head of one sentence to the tail of another (``你可以在上面的回答中使用
一个全属的编界；，这就是一种生命空氣。``, from two list items it had shown) or changes the
punctuation; copying what it wrote is the same loop as copying it exactly. A word or a number
that is new makes the unit new: parallel list items differ by a word, and a counter template
(``.row-2 {…}`` after ``.row-1 {…}``) by a number.

The cut is where the restatement begins, and at a restart the continuation's start, so none of
it is shown. Another continuation would be sent the same answer, so the engine finishes the
response there (the user keeps the answer shown so far).

Only in the answer, as for ``parrot``: reasoning restating what it said is what reasoning does.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Final

from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.limits import LONG_UNIT
from looprescue.detect.rule import UNIT, WATERMARK, Rule
from looprescue.detect.segment import Segmenter
from looprescue.detect.shape import char_widths, text_width
from looprescue.detect.text import SENTENCE_END, LineKind, classify_line, excerpt

_FEEDS: Final = frozenset({UNIT, WATERMARK})

RESTATED_MIN_WIDTH: Final = 20
# Short units (list items, code) that open a continuation before anything is restated: after
# this many the opening is over, so a continuation of short lines is not held back for long.
OPENING_UNITS: Final = 4
# chars a text can end a unit with (SENTENCE_END, its last char known to end the text)
_UNIT_ENDS: Final = frozenset("\n。！？.!?")
# A near copy is covered by pieces of the shown answer at least PIECE_WIDTH wide (about three
# words, or six CJK chars: shorter ones are common phrases any answer shares), but for marks and
# spaces at most NEAR_NEW_WIDTH wide and NEAR_NEW_SHARE of it.
PIECE_WIDTH: Final = 12
NEAR_NEW_WIDTH: Final = 8
NEAR_NEW_SHARE: Final = 0.2
# what a new letter or digit weighs: more than the marks a near copy may add
_NEW_WORD: Final = NEAR_NEW_WIDTH + 1


def fold_unit(text: str) -> str:
    """A unit as it is compared: whitespace runs as one space, none at the ends."""
    return " ".join(text.split())


def _says_something(unit: str) -> bool:
    return text_width(unit) >= RESTATED_MIN_WIDTH and classify_line(unit) not in (
        LineKind.FENCE,
        LineKind.SYMBOLS,
    )


def units_of(text: str) -> list[str]:
    """The folded units of a complete text that say something, in order: cut where the
    segmenter cuts a stream (a sentence end, a newline); the text's end ends the last one."""
    units: list[str] = []
    begin = 0
    size = len(text)
    for match in SENTENCE_END.finditer(text):
        end = match.start() + 1
        units.append(text[begin:end])
        begin = end
    if begin < size:
        units.append(text[begin:])
    # (longer units of the shown answer are not looked for)
    return [u for u in map(fold_unit, units) if len(u) <= LONG_UNIT and _says_something(u)]


class RestateRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("restate",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, shown: str = "", shown_loop: str = "") -> None:
        """``shown``: the answer the client already has (markers excluded); ``shown_loop``: the
        part of it that is the kept copy of the loop the cut removed."""
        self.channel = channel
        units = units_of(shown) if channel == "text" else []
        self._shown = frozenset(units)
        self._loop = frozenset(units_of(shown_loop)) & self._shown
        # the shown answer's last unit, when the answer ends with it (a model resuming there
        # restates it): not a restart on its own
        tail = shown.rstrip(" \t")
        ended = bool(tail) and tail[-1] in _UNIT_ENDS
        self._last = units[-1] if units and ended else None
        self._sorted = sorted(self._shown)
        # a unit with more raw chars than this cannot fold into a shown one (whitespace aside)
        self._raw_limit = 2 * max(map(len, self._sorted), default=0) + 64
        self._pieces = ShownPieces(fold_unit(shown) if units else "")
        self._last_pieces = ShownPieces(self._last or "")
        self._new_head_from = -1  # the unit being written (where it begins) is known to be new
        self._opening = True  # no unit that says something new yet
        self._short_units = 0  # short units in the opening
        self._pending: int | None = None  # where a restated unit that may begin a block starts

    @property
    def active(self) -> bool:
        """Whether there is a shown answer to watch for (the detector asks nothing else)."""
        return bool(self._shown)

    def on_unit(self, win: TextWindow, begin: int, end: int) -> Hit | None:
        """A unit of the stream (raw offsets, whitespace included) is complete."""
        if end - begin > self._raw_limit:
            unit = None  # too long to be a shown unit: new
        else:
            unit = fold_unit(win.slice(begin, end))
            if not unit:
                return None
            if not _says_something(unit):
                # short or layout: neither restated nor new
                if self._opening and self._pending is None:
                    self._short_units += 1
                    self._opening = self._short_units < OPENING_UNITS
                return None
        exact = unit is not None and unit in self._shown
        if unit is None or not (exact or self._pieces.near_copy(unit)):
            self._opening = False
            self._pending = None
            return None
        start = begin + _leading_space(win.slice(begin, end))
        if exact and unit in self._loop:
            return self._hit(0 if self._opening else start, end, unit)
        if self._opening:
            last = unit == self._last if exact else self._last_pieces.near_copy(unit)
            if not last or self._pending is not None:
                return self._hit(0, end, unit)
            self._pending = 0  # the shown answer's last unit: the next one decides
            return None
        if self._pending is not None:
            return self._hit(self._pending, end, unit)
        self._pending = start
        return None

    def _hit(self, prune: int, end: int, unit: str) -> Hit:
        return Hit(
            rule="restate",
            channel=self.channel,
            prune_offset=prune,
            loop_start=prune,
            fired_at=end,
            repeats=2.0,
            period=None,
            evidence=excerpt(unit, 60),
        )

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """Where a restatement not yet judged may begin: the continuation's start while its
        opening is undecided, a restated unit that the next one may join, or the unit being
        written while it could be a restated one."""
        unit_from, end = segmenter.sentence_from, win.end
        head = self._head(win, unit_from, end)
        could_be = head is not None and self._could_be(head, unit_from)
        if self._opening:
            if head is not None and (could_be or not _says_something(head)):
                return 0
            return end  # the unit being written ends the opening: it says something new
        if self._pending is not None:
            return self._pending
        if could_be:
            return unit_from + _leading_space(win.slice(unit_from, end))
        return end

    def _head(self, win: TextWindow, unit_from: int, end: int) -> str | None:
        """The unit being written, folded; None once it is too long to be a shown one."""
        if end - unit_from > self._raw_limit:
            return None
        return fold_unit(win.slice(unit_from, end))

    def _could_be(self, head: str, unit_from: int) -> bool:
        """Whether a unit that begins with ``head`` may be restated: a prefix of a shown unit,
        or with no more new chars than a near copy has. Once it has more, it is new whatever
        follows (a char the pieces leave out stays out), so the unit is not looked at again."""
        units = self._sorted
        at = bisect_left(units, head)
        if at < len(units) and units[at].startswith(head):
            return True
        if unit_from == self._new_head_from:
            return False
        if self._pieces.settled_new_width(head) <= NEAR_NEW_WIDTH:
            return True
        self._new_head_from = unit_from
        return False


class ShownPieces:
    """The pieces of a text (each the shortest substring ``PIECE_WIDTH`` wide from each of its
    chars), to tell how much of a unit is made of them. The shortest piece from a char depends
    on the chars alone, so a unit's piece from a char is one of these when the text has it."""

    def __init__(self, text: str) -> None:
        self._pieces = frozenset(_pieces_of(text))

    def near_copy(self, unit: str) -> bool:
        """Whether ``unit`` (folded) is made of pieces but for a few marks."""
        new, _ = self._new_widths(unit)
        width = text_width(unit)
        return width >= PIECE_WIDTH and new <= min(NEAR_NEW_WIDTH, NEAR_NEW_SHARE * width)

    def settled_new_width(self, head: str) -> int:
        """The width of ``head``'s chars that no piece covers whatever follows (those before
        the first char that starts no whole piece yet: a later piece may cover the rest), a
        letter or digit among them more than a near copy may have."""
        return self._new_widths(head)[1]

    def _new_widths(self, unit: str) -> tuple[int, int]:
        """(width of the chars no piece covers, of those the ones no later char can cover),
        a letter or digit weighing ``_NEW_WORD``."""
        widths = char_widths(unit)
        spans = _piece_spans(widths)
        weights = [
            _NEW_WORD if char.isalnum() else width for char, width in zip(unit, widths, strict=True)
        ]
        covered_to = new = 0  # chars before covered_to are covered or counted in new
        for start, stop in spans:
            if unit[start:stop] in self._pieces:
                new += sum(weights[covered_to:start])
                covered_to = stop  # (spans' stops never decrease)
        # a piece yet to come starts past the last span's start: chars before that are settled
        settled = new + sum(weights[covered_to : len(spans)])
        return new + sum(weights[covered_to:]), settled


def _piece_spans(widths: list[int]) -> list[tuple[int, int]]:
    """(start, stop) of the shortest span ``PIECE_WIDTH`` wide from each char that has one."""
    spans = []
    stop = width = 0
    size = len(widths)
    for start in range(size):
        while width < PIECE_WIDTH and stop < size:
            width += widths[stop]
            stop += 1
        if width < PIECE_WIDTH:
            break
        spans.append((start, stop))
        width -= widths[start]
    return spans


def _pieces_of(text: str) -> list[str]:
    return [text[start:stop] for start, stop in _piece_spans(char_widths(text))]


def _leading_space(raw: str) -> int:
    return len(raw) - len(raw.lstrip())
