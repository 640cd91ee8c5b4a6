"""Rule ``paragraph`` (text channel): a long prose paragraph is re-emitted verbatim.

Loops of whole summary paragraphs have periods of ~800 chars, so three copies take long to
arrive; a second verbatim copy of ``paragraphMinChars`` chars of prose, starting at a line start,
is already a loop signal in visible text. Only prose counts: long lines (wrapped paragraphs,
not lyrics, not list items), mostly letters, with sentence punctuation. Code, logs, lists and
quoted blocks are left to the stricter ``cycle`` rule, because quoting the same code twice is
legitimate, and so is a plan that writes one week out again. A copy under a label line of its
own (``**Day 7: Travel day**`` over a paragraph first said under ``**Day 4: …**``) is the next
item of a list, not a loop.

The match only says that the repetition is there; the hit itself (how far back it really starts,
its unit, the cut after one copy) is made by the periodic rule, so a paragraph loop is pruned
exactly as a cycle is.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.copies import hit_for
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.rule import CHECKPOINT, LINE_START, Rule
from looprescue.detect.segment import Segmenter
from looprescue.detect.text import LABEL_ENDS, LineKind, classify_line

_FEEDS: Final = frozenset({LINE_START, CHECKPOINT})

MIN_LETTER_RATIO: Final = 0.6  # of non-space chars; code and logs sit well below
MIN_MEDIAN_LINE: Final = 60  # chars; verse and checklists have short lines
SENTENCE_MARKS: Final = (". ", "。", "! ", "? ", "！", "？")


def _is_prose(text: str) -> bool:
    dense = [ch for ch in text if not ch.isspace()]
    if not dense or sum(ch.isalpha() for ch in dense) < MIN_LETTER_RATIO * len(dense):
        return False
    stripped = [line.strip() for line in text.split("\n") if line.strip()]
    lines = sorted(map(len, stripped))
    if not lines or lines[len(lines) // 2] < MIN_MEDIAN_LINE:
        return False
    items = sum(1 for line in stripped if classify_line(line) is LineKind.LIST_ITEM)
    if 2 * items > len(stripped):
        return False  # a list's items (a plan's week written out again)
    return sum(text.count(mark) for mark in SENTENCE_MARKS) >= 2


# A label line is short and names what follows: a markdown heading, a bold line, or a line
# that ends in a colon (``**Day 7 — Travel day**``, ``### Week 4``, ``第四天：``).
LABEL_CHARS: Final = 100


def _label_before(raw: str, at: int) -> str:
    """The label line right above the line at ``at`` (blank lines between skipped), or ""."""
    end = at
    while end > 0 and raw[end - 1].isspace():
        end -= 1  # (a few blank chars: no copy of the window's text before it)
    line = raw[raw.rfind("\n", 0, end) + 1 : end].strip()
    if not line or len(line) > LABEL_CHARS:
        return ""
    if line.startswith("#") or line.startswith("**") or line[-1] in LABEL_ENDS:
        return line
    return ""


def _relabelled(raw: str, first: int, second: int) -> bool:
    """Whether the copy at ``second`` sits under a label of its own, not the first copy's: a
    plan's rest day or travel day said again under the day it falls on is the next item of
    the plan, not a paragraph said again (a label said again over each copy names none)."""
    label = _label_before(raw, second)
    return bool(label) and label != _label_before(raw, first)


class ParagraphRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("paragraph",)

    def feeds(self) -> frozenset[str]:
        # (no watermark of its own: a second copy is held back by the periodic rules')
        return _FEEDS

    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        self._channel = channel
        self._min_chars: int = cfg.paragraphMinChars
        self._max_lag: int = cfg.cycleMaxPeriod
        self._line_starts: deque[int] = deque()

    def on_line_start(self, offset: int) -> None:
        self._line_starts.append(offset)

    def at_checkpoint(
        self, win: TextWindow, cp: int, final: bool, segmenter: Segmenter
    ) -> Hit | None:
        starts = self._line_starts
        raw, base, need = win.raw, win.base, self._min_chars
        while starts and starts[0] + need <= cp:
            rel = starts[0] - base
            if rel < 0:
                starts.popleft()
                continue
            lead = len(raw[rel : rel + need]) - len(raw[rel : rel + need].lstrip())
            if starts[0] + lead + need > cp:
                break  # indentation pushed the probe past what we have; look again later
            starts.popleft()
            if lead == need:
                continue
            begin = rel + lead
            probe = raw[begin : begin + need]
            horizon = max(0, cp - win.keep - base)
            # the search first: it is done in C, and mostly finds nothing to judge
            found = raw.rfind(probe, max(horizon, begin - self._max_lag), begin)
            if found >= 0 and _is_prose(probe) and not _relabelled(raw, found, begin):
                second, stop = win.folded_of(begin + base), win.folded_of(begin + base + need)
                lag = second - win.folded_of(found + base)
                hit = hit_for(win, self._channel, "paragraph", lag, stop, cp, stop - second)
                if hit is not None:
                    return hit
        return None
