"""Rule ``renumbered``: a numbered item whose sentence stays while its number moves on.

``12. Check the config file before writing.``, a note or a summary, then ``13. Check the
config file before writing.``, and again: the list counts on, but its items say nothing new.
The periodic ``counter`` rule cuts such items when they come back to back; a model that writes
a note, a summary or a blank line between some of them leaves no period, and a number in a
mark of Chinese text (``第十二条``) is no list number to it, but an enumeration. This rule is
what sees them. The number may stand in any mark a list takes: ``12.``, ``12)``, and in
Chinese text ``12、``, ``(12)``, ``（十二）``, ``十二、``, ``第十二条`` (or 步, 章, 节, 项,
点, 课, 天).

Why it is a loop: a list a user asks for changes its words from item to item (``user id 7``,
``user id 8``), and a list of answers repeats a short word (``Yes``, ``无``), never a sentence.
So only a sentence counts: an item body at least ``SENTENCE_WIDTH`` wide (a CJK char counted as
two), said again word for word, its number one higher each time, each copy within ``GAP``
chars of the last. ``cycleMinRepeats`` copies (3) make the loop: a sentence said under three numbers
is no list anyone asked for.

Not a loop: the same sentence under numbers that do not count on by one (two lists that
share an item; a plan whose rest day says the same under day 7, 14 and 21), copies far apart
(a checklist restated at the end of a long answer), items inside a code fence.

Cut: where the second copy's line begins; the first copy is kept, as a cycle keeps one copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.asked import zh_number
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

# A numbered list item: ``12. body`` or ``12) body``.
_ITEM: Final = re.compile(r"[ \t]*([0-9]{1,6})[.)][ \t]+(.*\S)")
# A number in Chinese words, 1 to 99 (``zh_number`` reads it).
_ZH: Final = "[一二两三四五六七八九]?十[一二三四五六七八九]?|[一二两三四五六七八九]"
# The other marks a list item's number takes in Chinese text: each names the number (in the
# one group that matched), the line's body follows. (A word and a number, ``Step 12:``, is a
# counter label: a log's line may say the same under it, and ``counter`` judges it.)
_LABELLED: Final = re.compile(
    rf"""(?x) [ \t]*
    (?: (?P<d>[0-9]{{1,6}}) 、
      | [(（] (?P<p>[0-9]{{1,4}}|{_ZH}) [)）]
      | 第 (?P<o>[0-9]{{1,4}}|{_ZH}) [条步章节项点课天] [:：、,，.]?
      | (?P<z>{_ZH}) 、
    ) [ \t]* (?P<body>.*\S)"""
)
# What a line being written may still grow into an item from: a label, whole or in part,
# and nothing after it yet. Held until the line can no longer be one.
_LABEL_HEAD: Final = re.compile(
    rf"""(?x) [ \t]*
    (?: [0-9]{{1,6}} (?: [.)、] [ \t]* )?
      | [(（] (?: (?:[0-9]{{1,4}}|{_ZH}) (?: [)）] [ \t]* )? )?
      | 第 (?: (?:[0-9]{{1,4}}|{_ZH}) (?: [条步章节项点课天] [:：、,，.]? [ \t]* )? )?
      | (?:{_ZH}) (?: 、 [ \t]* )?
    )"""
)


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
        """A complete line (stripped) outside code fences, of a list item or of prose: an item
        when a list number or a Chinese list mark opens it."""
        item = _ITEM.match(line)
        if item is not None:
            return self._on_numbered(line, int(item.group(1)), item.group(2), start, end)
        labelled = _LABELLED.match(line)
        if labelled is None:
            return None
        number = next(n for n in labelled.group("d", "p", "o", "z") if n is not None)
        return self._on_numbered(line, zh_number(number), labelled.group("body"), start, end)

    def _on_numbered(self, line: str, number: int, body: str, start: int, end: int) -> Hit | None:
        if len(body) < SENTENCE_WIDTH // 2 or text_width(body) < SENTENCE_WIDTH:
            return None
        copies = self._items.get(body)
        if copies is not None and number == copies.number + 1 and start - copies.last_end <= GAP:
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
        end = win.end
        if end - self._latest_end > GAP:
            return end  # no copy of any item can follow any more
        held = end
        for copies in self._seconds.values():
            if end - copies.last_end <= GAP and copies.second < held:
                held = copies.second
        line_start = segmenter.line_from
        if line_start == self._free_line or line_start >= end:
            return held
        if self._may_be_copy(win.slice(line_start, end)):
            return min(held, line_start)
        self._free_line = line_start  # a line only grows: it can be no copy now
        return held

    def _may_be_copy(self, line: str) -> bool:
        """Whether the line being written may become a copy of an item remembered: a label
        being written, or a label and the start of a remembered sentence. (The line's own end
        may not have been judged yet: a copy then ends with it.)"""
        line = line.lstrip(" \t")
        if not line or _LABEL_HEAD.fullmatch(line):
            return True
        item = _ITEM.match(line)
        if item is not None:
            so_far = item.group(2)
        else:
            labelled = _LABELLED.match(line)
            if labelled is None:
                return False
            so_far = labelled.group("body")
        return any(body.startswith(so_far) for body in self._items)
