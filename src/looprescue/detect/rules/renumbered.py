"""Rule ``renumbered``: a numbered item whose sentence stays while its number moves on.

``12. Check the config file before writing.``, a note or a summary, then ``13. Check the
config file before writing.``, and again: the list counts on, but its items say nothing new.
The periodic ``counter`` rule cuts such items when they come back to back; a model that writes
a note, a summary or a blank line between some of them has no period, and this rule is what
sees it.

Why it is a loop: a list a user asks for changes its words from item to item (``user id 7``,
``user id 8``), and a list of answers repeats a short word (``Yes``, ``无``), never a sentence.
So only a sentence counts: an item body at least ``SENTENCE_WIDTH`` wide (a CJK char counted as
two), said again word for word, its number higher each time, each copy within ``GAP`` chars of
the last. ``cycleMinRepeats`` copies (3) make the loop: a sentence said under three numbers
is no list anyone asked for.

Not a loop: the same sentence under numbers that do not count on (two lists that share an
item), copies far apart (a checklist restated at the end of a long answer), items inside a
code fence.

Cut: where the second copy's line begins; the first copy is kept, as a cycle keeps one copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.rule import ITEM, WATERMARK, Rule
from looprescue.detect.segment import Segmenter
from looprescue.detect.shape import text_width
from looprescue.detect.text import excerpt

_FEEDS: Final = frozenset({ITEM, WATERMARK})

# An item body at least this wide is a sentence of about five words or more; a list of answers
# repeats shorter ones ("Yes, that is fine.", "无").
SENTENCE_WIDTH: Final = 30
# Copies of one item lie at most this far apart (a note and a summary fit between them).
GAP: Final = 1200
# Items remembered at once: the recent sentences of a list.
ITEMS_REMEMBERED: Final = 64

_ITEM: Final = re.compile(r"[ \t]*([0-9]{1,6})[.)][ \t]+(.*\S)")
_DIGITS: Final = re.compile(r"[0-9]{1,6}")


@dataclass(slots=True)
class _Copies:
    first: int  # where the first copy's line begins
    second: int  # where the second copy's line begins (-1: none yet)
    number: int  # the latest copy's list number
    last_end: int  # where the latest copy ends
    count: int


class RenumberedRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("renumbered",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        self._channel = channel
        self._need: float = cfg.cycleMinRepeats
        self._items: dict[str, _Copies] = {}  # insertion-ordered: oldest first
        self._seconds: dict[str, _Copies] = {}  # the items said twice or more
        self._latest_end = -GAP - 1  # where the latest remembered item ended
        self._free_line = -1  # an unfinished line that can be no copy, whatever comes

    def on_item(self, line: str, start: int, end: int) -> Hit | None:
        """A complete numbered list line (stripped), outside code fences."""
        match = _ITEM.match(line)
        if match is None:
            return None
        body = match.group(2)
        if len(body) < SENTENCE_WIDTH // 2 or text_width(body) < SENTENCE_WIDTH:
            return None
        number = int(match.group(1))
        copies = self._items.get(body)
        if copies is not None and number > copies.number and start - copies.last_end <= GAP:
            copies.count += 1
            if copies.second < 0:
                copies.second = start
                self._seconds[body] = copies
            copies.number, copies.last_end = number, end
            self._latest_end = end
            if copies.count >= self._need:
                return Hit(
                    rule="renumbered",
                    channel=self._channel,
                    prune_offset=copies.second,
                    loop_start=copies.first,
                    fired_at=end,
                    repeats=float(copies.count),
                    period=None,
                    evidence=excerpt(line),
                )
            return None
        self._items.pop(body, None)
        self._seconds.pop(body, None)
        self._items[body] = _Copies(start, -1, number, end, 1)
        self._latest_end = end
        if len(self._items) > ITEMS_REMEMBERED:
            oldest = next(iter(self._items))
            del self._items[oldest]
            self._seconds.pop(oldest, None)
        return None

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """Earliest offset a future hit could prune: the second copy of an item whose copies
        may still go on, or the line being written while it may turn out a second copy."""
        line_start, end = segmenter.line_from, win.end
        if end - self._latest_end > GAP:
            return end  # no copy of any item can follow any more
        held = end
        for copies in self._seconds.values():
            if end - copies.last_end <= GAP and copies.second < held:
                held = copies.second
        if line_start == self._free_line or line_start >= end:
            return held
        line = win.slice(line_start, end).lstrip(" \t")
        number = _DIGITS.match(line)
        if number is None:
            if line:
                self._free_line = line_start  # no number in front: no item
                return held
            return min(held, line_start)  # indentation only, so far
        rest = line[number.end() :]
        if not rest:
            return min(held, line_start)  # the number is being written
        if rest[0] not in ".)" or (len(rest) > 1 and rest[1] not in " \t"):
            self._free_line = line_start  # "12.5", "3x": no list number
            return held
        # (the line's own end may not have been judged yet: a copy then ends with it)
        so_far = rest[1:].strip()
        if not so_far or any(body.startswith(so_far) for body in self._items):
            return min(held, line_start)
        self._free_line = line_start  # a line only grows: it can be no copy now
        return held
