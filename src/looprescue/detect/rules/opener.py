"""Rule ``opener``: line after line opens with the same long head, its tail changing among a
few.

What it catches. An agent's reasoning that says again and again what it will do next, every
line opening with the same sentence and ending with one of a handful of remarks: ``I'll call
the get_stock_price tool with {"symbol": "AAPL"}. The tool should give me the last trade
price.``, then the same call with ``now`` or nothing after it, then the first remark again.
No line is the one before said again, so there is no period, and the head is too wide for a
phrase of a pool.

Why that is a loop. The head is said at every line, and the lines bring nothing new: at most
one in two is a line not said before in the run.

What is not a loop. Lines that say something new after the head (one case checked after
another: more than half of the run's lines are new); lines that differ in a number alone (a
log's readings taking a few values; lines all the same are the periodic rules'); fewer than
``OPENER_LINES`` lines in a row, or fewer than ``poolMinChars`` wide in all (a CJK char
counted as two). A line whose head shared with the run is narrower than ``MIN_WIDTH``
(``Wait, let me``), or that is marks alone (a divider), starts a new run, and a line in a
code fence, a fence line or a table row ends it.

Where it cuts. After the run's first line: one copy kept, as a cycle keeps one.

How it stays incremental. Lines are read once, at the checkpoint after they end; the run
keeps its head (the longest one all its lines share, ended at a word's end), where its first
line begins and ends, and its distinct lines (at most one in two, or the run says new things
and cannot fire).
"""

from __future__ import annotations

import re
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.rule import CHECKPOINT, WATERMARK, LineRule
from looprescue.detect.segment import Segmenter
from looprescue.detect.shape import text_width
from looprescue.detect.text import excerpt, has_alnum

_FEEDS: Final = frozenset({CHECKPOINT, WATERMARK})

# Lines in a row that open with one head before the run is a loop.
OPENER_LINES: Final = 6
# The head is at least this wide (a CJK char counted as two): a connector such as ``Wait,
# let me`` or ``Let me check`` opens healthy lines again and again.
MIN_WIDTH: Final = 24
# A line's head is read from at most this many of its chars.
MAX_CHARS: Final = 240
# A run that has said this many different lines says something new: it starts again (the
# memory a run holds stays bounded).
MAX_SEEN: Final = 64

# a number with its decimal or time parts: what a log's readings change
_NUMBER: Final = re.compile(r"\d+(?:[.,:]\d+)*")


def _common_head(a: str, b: str) -> str:
    """The longest head ``a`` and ``b`` share, ended at a word's end (or anywhere in CJK)."""
    n = 0
    limit = min(len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    if 0 < n < limit and _in_word(a[n - 1]) and (_in_word(a[n]) or _in_word(b[n])):
        # (a word cut in the middle: back to its start)
        while n > 0 and _in_word(a[n - 1]):
            n -= 1
    return a[:n]


def _in_word(char: str) -> bool:
    """Whether ``char`` is a letter or digit of a spaced script (a CJK char is a word)."""
    return char.isascii() and char.isalnum()


class OpenerRule(LineRule):
    def names(self) -> tuple[str, ...]:
        return ("opener",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        super().__init__()
        self._channel = channel
        self._min_chars = cfg.poolMinChars
        self._returned = 0  # the watermark given last
        # the run: its opening sentence ("" when none), how many lines in a row open with it,
        # where the first begins and ends, and the tails said after it (how often each)
        self._opener = ""
        self._lines = 0
        self._first = 0
        self._first_end = 0
        self._first_line = ""  # the run's first line, stripped
        self._seen: dict[str, None] = {}  # the run's lines, each once (from its second on)
        self._shapes: dict[str, None] = {}  # the same with their digits masked
        self._width = 0  # of the run's lines (a CJK char counted as two)

    def on_ended_line(
        self, line: str, start: int, end: int, cp: int, segmenter: Segmenter
    ) -> Hit | None:
        stripped = line.strip()
        if not stripped:
            return None  # a blank line goes with the run around it
        if segmenter.code_or_table(stripped, start):
            self._opener = ""  # code or a table: lines alike are how they are written
            return None
        opener = _common_head(self._opener, stripped) if self._opener else ""
        if len(self._seen) >= MAX_SEEN and stripped not in self._seen:
            opener = ""  # (many lines, mostly new: no loop so far, and none to keep)
        if len(opener) < MIN_WIDTH and (
            2 * len(opener) < MIN_WIDTH or text_width(opener) < MIN_WIDTH
        ):
            # a new run: this line's head is the opener its next lines must share (most
            # lines; the run's tallies wait for a second line)
            head = stripped[:MAX_CHARS]
            wide = len(head) >= MIN_WIDTH or (
                2 * len(head) >= MIN_WIDTH and text_width(head) >= MIN_WIDTH
            )
            # (a divider or other marks alone are layout: no opener)
            self._opener = head if wide and has_alnum(head) else ""
            self._lines, self._first_line, self._seen = 1, stripped, {}
            self._first, self._first_end = start, end
            return None
        self._opener = opener
        if self._lines == 1:
            first = self._first_line
            self._seen = {first: None}
            self._shapes = {_NUMBER.sub("#", first): None}
            self._width = text_width(first)
        self._lines += 1
        self._seen[stripped] = None
        self._shapes[_NUMBER.sub("#", stripped)] = None
        self._width += text_width(stripped)
        if self._lines >= OPENER_LINES and self._repeating() and self._width >= self._min_chars:
            cut = self._first_end
            return Hit(
                rule="opener",
                channel=self._channel,
                prune_offset=cut,
                loop_start=self._first,
                fired_at=end,
                repeats=float(self._lines),
                period=cut - self._first,
                evidence=excerpt(opener),
                lead_in=max(0, self._returned - cut),
            )
        return None

    def _repeating(self) -> bool:
        """Whether the run's lines bring nothing new: at most one in two is a new line, and
        they differ in words (lines that differ in a number alone are a log's readings, and
        lines all the same are the periodic rules')."""
        return 2 * len(self._seen) <= self._lines and len(self._shapes) >= 2

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """Earliest offset a future hit could prune: after the run's first line while the run
        goes on saying little new."""
        held = win.end
        # (from the second line on: holding every line that begins as the one before did
        # would stall markdown's bullets; a loop's second line goes out, and counts as leaked)
        if (
            self._lines >= 2
            and len(self._shapes) >= 2  # (a log's readings: no hold)
            and 2 * (len(self._seen) - 1) <= self._lines
        ):
            held = self._first_end
        held = max(held, self._returned)
        self._returned = held
        return held
