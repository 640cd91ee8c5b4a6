"""One channel's detector: feeds text through the segmenter and the rules in offset order."""

from __future__ import annotations

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.rules.lines import LinesRule
from looprescue.detect.rules.paragraph import ParagraphRule
from looprescue.detect.rules.periodic import PeriodicRule
from looprescue.detect.rules.pool import PoolRule
from looprescue.detect.segment import Segmenter

# Rules run at checkpoints every STRIDE chars of the channel (absolute offsets, so the same
# text hits the same checkpoints in any chunking). 32 keeps detection delay well under one loop
# period while making per-delta work a list append.
STRIDE = 32


class ChannelDetector:
    """Detects loops in one channel. After the first hit it latches: a consumer cuts there,
    and ``scan`` users prune everything after ``prune_offset``, so later hits add nothing."""

    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        self.channel = channel
        structural = channel == "text"
        # Held text: two maximal periods (a run is compared one period back, and new periods are
        # searched one period back) plus room for a paragraph probe.
        keep = 2 * cfg.cycleMaxPeriod + cfg.paragraphMinChars + 4 * STRIDE
        self._win = TextWindow(keep)
        self.horizon = keep
        self._periodic = PeriodicRule(channel, cfg, cfg.codeFenceFactor if structural else 1.0)
        self._pool = PoolRule(channel, cfg)
        self._lines = LinesRule(channel, cfg)
        self._paragraph = ParagraphRule(channel, cfg) if structural else None
        self._segmenter = Segmenter(
            structural,
            self._pool.on_sentence,
            self._lines.on_line,
            self._paragraph.on_line_start if self._paragraph else None,
        )
        self._done = 0  # offset up to which every rule has run
        self.hit: Hit | None = None

    @property
    def consumed(self) -> int:
        return self._win.end

    def feed(self, delta: str) -> Hit | None:
        if self.hit is not None or not delta:
            return None
        self._win.append(delta)
        # A checkpoint is processed once one char past it has arrived (sentence look-ahead).
        if self._win.end > self._done + STRIDE:
            return self._run(final=False)
        return None

    def flush(self) -> Hit | None:
        """End of the text: run the rules up to the last char."""
        if self.hit is not None:
            return None
        return self._run(final=True)

    def _run(self, final: bool) -> Hit | None:
        win = self._win
        win.sync()
        while self.hit is None:
            if win.end > self._done + STRIDE:
                checkpoint, last = self._done + STRIDE, False
            elif final and win.end > self._done:
                checkpoint, last = win.end, True
            else:
                break
            self.hit = self._checkpoint(checkpoint, last)
            self._done = checkpoint
        win.trim(self._done)
        return self.hit

    def _checkpoint(self, cp: int, final: bool) -> Hit | None:
        win = self._win
        hit = self._segmenter.scan(win, self._done, cp, final)
        if hit is None and self._paragraph is not None:
            hit = self._paragraph.at_checkpoint(win, cp)
        if hit is None:
            hit = self._periodic.at_checkpoint(win, cp, self._segmenter.in_fence)
        return hit

    def safe_offset(self) -> int:
        """Chars of this channel that no future hit can prune (a proxy may release them)."""
        if self.hit is not None:
            return self.hit.prune_offset
        win = self._win
        win.sync()
        end = win.end
        tail, tail_start = self._segmenter.tail(win)
        line_tail, line_start = self._segmenter.line_tail(win)
        return min(
            self._periodic.safe_offset(win, end),
            self._pool.safe_offset(tail, tail_start, end),
            self._lines.safe_offset(line_tail, line_start, end),
        )
