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
from looprescue.detect.shape import text_width
from looprescue.detect.text import SENTENCE_END, LineKind, classify_line, excerpt

RESTATED_MIN_WIDTH: Final = 20
# Units of the shown answer longer than this are not looked for.
LONGEST_UNIT: Final = 4096
# Short units (list items, code) that open a continuation before anything is restated: after
# this many the opening is over, so a continuation of short lines is not held back for long.
OPENING_UNITS: Final = 4
# chars a text can end a unit with (SENTENCE_END, its last char known to end the text)
_UNIT_ENDS: Final = frozenset("\n。！？.!?")


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
    return [u for u in map(fold_unit, units) if len(u) <= LONGEST_UNIT and _says_something(u)]


class RestateRule:
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
        if unit is None or unit not in self._shown:
            self._opening = False
            self._pending = None
            return None
        start = begin + _leading_space(win.slice(begin, end))
        if unit in self._loop:
            return self._hit(0 if self._opening else start, end, unit)
        if self._opening:
            if unit != self._last or self._pending is not None:
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

    def safe_offset(self, win: TextWindow, unit_from: int, end: int) -> int:
        """Where a restatement not yet judged may begin: the continuation's start while its
        opening is undecided, a restated unit that the next one may join, or the unit being
        written while it could be a restated one."""
        head = self._head(win, unit_from, end)
        could_be = head is not None and self._could_be(head, self._sorted)
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

    @staticmethod
    def _could_be(head: str, units: list[str]) -> bool:
        """Whether a unit that begins with ``head`` may be one of ``units`` (sorted)."""
        at = bisect_left(units, head)
        return at < len(units) and units[at].startswith(head)


def _leading_space(raw: str) -> int:
    return len(raw) - len(raw.lstrip())
