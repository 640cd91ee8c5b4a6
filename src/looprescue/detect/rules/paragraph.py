"""Rule ``paragraph`` (text channel): a long prose paragraph is re-emitted verbatim.

Loops of whole summary paragraphs have periods of ~800 chars, so three copies take long to
arrive; a second verbatim copy of ``paragraphMinChars`` chars of prose, starting at a line start,
is already a loop signal in visible text. Only prose counts: long lines (wrapped paragraphs,
not lyrics), mostly letters, with sentence punctuation. Code, logs, lists and quoted blocks are
left to the stricter ``cycle`` rule, because quoting the same code twice is legitimate.

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

_FEEDS: Final = frozenset({LINE_START, CHECKPOINT})

MIN_LETTER_RATIO: Final = 0.6  # of non-space chars; code and logs sit well below
MIN_MEDIAN_LINE: Final = 60  # chars; verse and checklists have short lines
SENTENCE_MARKS: Final = (". ", "。", "! ", "? ", "！", "？")


def _is_prose(text: str) -> bool:
    dense = [ch for ch in text if not ch.isspace()]
    if not dense or sum(ch.isalpha() for ch in dense) < MIN_LETTER_RATIO * len(dense):
        return False
    lines = sorted(len(line.strip()) for line in text.split("\n") if line.strip())
    if not lines or lines[len(lines) // 2] < MIN_MEDIAN_LINE:
        return False
    return sum(text.count(mark) for mark in SENTENCE_MARKS) >= 2


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
            if found >= 0 and _is_prose(probe):
                second, stop = win.folded_of(begin + base), win.folded_of(begin + base + need)
                lag = second - win.folded_of(found + base)
                hit = hit_for(win, self._channel, "paragraph", lag, stop, cp, stop - second)
                if hit is not None:
                    return hit
        return None
