"""One channel's detector: feeds text through the segmenter and the rules in offset order."""

from __future__ import annotations

from dataclasses import replace

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.limits import STRIDE
from looprescue.detect.nearcopy import extend_over_near_copies, with_renumbered_heading
from looprescue.detect.rules.echo import EchoRule
from looprescue.detect.rules.imports import ImportsRule
from looprescue.detect.rules.lines import LinesRule
from looprescue.detect.rules.overrun import OverrunRule
from looprescue.detect.rules.paragraph import ParagraphRule
from looprescue.detect.rules.parrot import ParrotRule
from looprescue.detect.rules.periodic import PeriodicRule
from looprescue.detect.rules.pool import PoolRule
from looprescue.detect.rules.renumbered import RenumberedRule
from looprescue.detect.rules.restate import RestateRule
from looprescue.detect.rules.rows import TableRowsRule
from looprescue.detect.rules.stutter import StutterRule
from looprescue.detect.segment import Segmenter


class ChannelDetector:
    """Detects loops in one channel. After the first hit it latches: a consumer cuts there,
    and ``scan`` users prune everything after ``prune_offset``, so later hits add nothing.
    A hit is returned once: by the ``feed``/``flush`` call that finds it, or, if
    ``safe_offset`` found it, by the next one."""

    def __init__(
        self,
        channel: Channel,
        cfg: DetectorConfig,
        asked: tuple[tuple[int, int], ...] = (),
        correction: tuple[str, ...] = (),
        shown: str = "",
        shown_loop: str = "",
    ) -> None:
        """``asked``: the numbered ranges the request asks for (``detect.asked``);
        ``correction``: the sentences of the correction a continuation was sent
        (``rules.parrot``); ``shown``: the answer the client already has when this is a
        continuation, and ``shown_loop`` the kept copy of the loop in it (``rules.restate``)."""
        self.channel = channel
        structural = channel == "text"
        # Held text: two maximal periods (a run is compared one period back, and new periods are
        # searched one period back) plus room for a paragraph probe.
        keep = 2 * cfg.cycleMaxPeriod + cfg.paragraphMinChars + 4 * STRIDE
        self._win = TextWindow(keep)
        self._periodic = PeriodicRule(channel, cfg, fence_guard=structural)
        self._pool = PoolRule(channel, cfg)
        self._stutter = StutterRule(channel, cfg)
        self._lines = LinesRule(channel, cfg)
        self._echo = EchoRule(channel, cfg)
        self._rows = TableRowsRule(channel)
        self._imports = ImportsRule(channel)
        self._renumbered = RenumberedRule(channel, cfg)
        self._overrun = OverrunRule(channel, asked)
        self._parrot = ParrotRule(channel, correction)
        self._restate = RestateRule(channel, shown, shown_loop)
        self._paragraph = ParagraphRule(cfg, self._periodic) if structural else None
        self._segmenter = Segmenter(
            structural,
            self._pool.on_sentence,
            self._lines.on_line,
            self._paragraph.on_line_start if self._paragraph else None,
            # a sentence with this many chars cannot normalise to a phrase (edges are short)
            long_sentence=4 * cfg.poolMaxPhraseChars + 64,
            table=self._rows,
            code=self._imports,
            on_clauses=self._stutter.on_sentence,
            on_unit=self._restate.on_unit if self._restate.active else None,
            on_open_sentence=self._stutter.on_open_sentence,
            items=self._renumbered,
        )
        self._done = 0  # offset up to which every rule has run
        self.wait_until = STRIDE  # feed runs the rules once more than this has arrived
        self.hit: Hit | None = None
        self._reported = False

    @property
    def consumed(self) -> int:
        return self._win.end

    def feed(self, delta: str) -> Hit | None:
        """Take a delta; return a hit not reported before (found now or by ``safe_offset``)."""
        # The hot path: a list append and a compare (this runs for every delta;
        # StreamDetector.feed repeats these lines to save a call).
        if self.hit is None:
            win = self._win
            win.pending.append(delta)
            win.end += len(delta)
            # A checkpoint is processed once one char past it has arrived (look-ahead for an
            # English full stop), so rules see the same text whatever the chunking.
            if win.end <= self.wait_until:
                return None
        return self.advance()

    def advance(self) -> Hit | None:
        """Run the checkpoints the received text allows; return a hit not reported before."""
        if self.hit is None:
            self._advance(final=False, eager=False)
        return self._report()

    def flush(self) -> Hit | None:
        """End of the text: run the rules up to the last char."""
        if self.hit is None:
            self._advance(final=True, eager=False)
        return self._report()

    def _report(self) -> Hit | None:
        if self.hit is not None and not self._reported:
            self._reported = True
            return self.hit
        return None

    def _advance(self, final: bool, eager: bool) -> None:
        """Run every checkpoint whose look-ahead has arrived; with ``eager`` also every sentence
        and line boundary (what ``safe_offset`` needs). Order is by offset either way."""
        win = self._win
        win.sync()
        while self.hit is None:
            checkpoint = self._done + STRIDE
            if checkpoint < win.end:
                self.hit = self._checkpoint(checkpoint, final=False)
            elif final and self._done < win.end:
                checkpoint = win.end
                self.hit = self._checkpoint(checkpoint, final=True)
            else:
                break
            self._done = checkpoint
        self.wait_until = self._done + STRIDE
        if eager and self.hit is None:
            hit = self._segmenter.scan_to(win, win.end - 1)
            if hit is not None and hit.rule == "pool":
                hit = with_renumbered_heading(win, hit)
            self.hit = (
                extend_over_near_copies(win, hit, self._segmenter.fenced)
                if hit is not None
                else None
            )
        win.trim(self._done)
        self._segmenter.forget_fences_before(win.base)

    def _checkpoint(self, cp: int, final: bool) -> Hit | None:
        win = self._win
        hit = self._segmenter.scan_to(win, cp, final)
        if hit is not None and hit.rule == "pool":
            hit = with_renumbered_heading(win, hit)
        if hit is None:
            hit = self._echo.at_checkpoint(win, cp, self._segmenter)
        if hit is None and self._paragraph is not None:
            hit = self._paragraph.at_checkpoint(win, cp)
        if hit is None:
            hit = self._periodic.at_checkpoint(win, cp, self._segmenter)
            if hit is not None:
                hit = self._batch_start(hit)
        if hit is None and self._overrun.active:
            hit = self._overrun.at_checkpoint(win, cp, final)
        if hit is None and self._parrot.active:
            hit = self._parrot.at_checkpoint(win, cp, final)
        return (
            extend_over_near_copies(win, hit, self._segmenter.fenced) if hit is not None else None
        )

    def _batch_start(self, hit: Hit) -> Hit:
        """A periodic loop of short phrases or lines that settled out of a reshuffled batch of
        them (``OK. Go. OK. OK. Go. Now. Go. Now. Go. Now.``) began where the batch did: the
        cut moves there and keeps none of it, as the pool's and the lines' own cuts do. Their
        runs are held back by the watermark from their start, so the cut stays honest."""
        earliest = hit.loop_start
        for onset in (self._pool.batch_onset(), self._lines.batch_onset()):
            if onset is not None and onset < earliest:
                earliest = onset
        if earliest == hit.loop_start:
            return hit
        return replace(hit, loop_start=earliest, prune_offset=earliest)

    def safe_offset(self) -> int:
        """Chars of this channel that no future hit can prune (a proxy may release them)."""
        if self.hit is None:
            self._advance(final=False, eager=True)
        if self.hit is not None:
            # the rule's own cut: what was released before the hit never passes it
            return self.hit.prune_offset + self.hit.lead_in
        win = self._win
        end = win.end
        segmenter = self._segmenter
        sentence_from, line_from = segmenter.sentence_from, segmenter.line_from
        # two-argument mins: compiled, they compare native ints (a longer min() goes generic)
        held = min(self._periodic.safe_offset(win), self._echo.safe_offset(win))
        held = min(held, self._pool.safe_offset(win, sentence_from, end))
        held = min(held, self._stutter.safe_offset(win, sentence_from, end))
        held = min(held, self._lines.safe_offset(win, line_from, end))
        held = min(held, self._rows.safe_offset(win, line_from, end))
        held = min(held, self._imports.safe_offset(win, line_from, end, segmenter.in_fence))
        held = min(held, self._renumbered.safe_offset(win, line_from, end))
        if self._overrun.active:
            held = min(held, self._overrun.safe_offset(win))
        if self._parrot.active:
            held = min(held, self._parrot.safe_offset(win))
        if self._restate.active:
            held = min(held, self._restate.safe_offset(win, sentence_from, end))
        return held
