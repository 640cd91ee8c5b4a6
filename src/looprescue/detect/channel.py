"""One channel's detector: feeds text through the segmenter and the rules in offset order."""

from __future__ import annotations

from dataclasses import replace

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.limits import STRIDE
from looprescue.detect.nearcopy import extend_over_near_copies
from looprescue.detect.registry import RuleContext, build_rules
from looprescue.detect.rule import (
    CHECKPOINT,
    CLAUSES,
    CODE_LINE,
    ITEM,
    LINE,
    LINE_START,
    OPEN_SENTENCE,
    ROW,
    SENTENCE,
    UNIT,
    WATERMARK,
    Rule,
)
from looprescue.detect.segment import CodeSink, Segmenter, SentenceSink, ends_in_fence


def _both(first: SentenceSink, second: SentenceSink) -> SentenceSink:
    """One sink that hands a unit to two rules, in order; the first hit wins."""

    def sink(text: str, start: int, end: int) -> Hit | None:
        hit = first(text, start, end)
        later = second(text, start, end)
        return hit if hit is not None else later

    return sink


def _clauses_sink(takers: list[Rule]) -> SentenceSink | None:
    """The ``CLAUSES`` feed's sink: several rules look inside a sentence."""
    if not takers:
        return None
    sink: SentenceSink = takers[0].on_clauses
    for rule in takers[1:]:
        sink = _both(sink, rule.on_clauses)
    return sink


class _CodeLines:
    """The ``CODE_LINE`` feed's sink when several rules read the lines inside fences: each
    gets every line, in order; the first hit wins."""

    def __init__(self, rules: list[Rule]) -> None:
        self._rules = rules

    def on_code_line(self, line: str, start: int, end: int) -> Hit | None:
        hit: Hit | None = None
        for rule in self._rules:
            found = rule.on_code_line(line, start, end)
            if hit is None:
                hit = found
        return hit

    def end_fence(self, end: int) -> None:
        for rule in self._rules:
            rule.end_fence(end)


def _code_sink(takers: list[Rule]) -> CodeSink | None:
    if not takers:
        return None
    return takers[0] if len(takers) == 1 else _CodeLines(takers)


def _segmenter(
    structural: bool,
    takers: dict[str, Rule],
    clauses: list[Rule],
    code: list[Rule],
    long_sentence: int,
    in_fence: bool,
) -> Segmenter:
    """A segmenter that hands each of its feeds to the rule that takes it (``CLAUSES`` and
    ``CODE_LINE`` to each of the rules that take them)."""
    sentence, line, line_start = takers.get(SENTENCE), takers.get(LINE), takers.get(LINE_START)
    unit, opening = takers.get(UNIT), takers.get(OPEN_SENTENCE)
    return Segmenter(
        structural,
        sentence.on_sentence if sentence is not None else None,
        line.on_line if line is not None else None,
        line_start.on_line_start if line_start is not None else None,
        long_sentence=long_sentence,
        table=takers.get(ROW),
        code=_code_sink(code),
        on_clauses=_clauses_sink(clauses),
        on_unit=unit.on_unit if unit is not None else None,
        on_open_sentence=opening.on_open_sentence if opening is not None else None,
        items=takers.get(ITEM),
        in_fence=in_fence,
    )


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
        asked_up_to: int | None = None,
        sections: tuple[tuple[int, str], ...] = (),
    ) -> None:
        """``asked``: the numbered ranges the request asks for (``detect.asked``);
        ``correction``: the sentences of the correction a continuation was sent
        (``rules.parrot``); ``shown``: the answer the client already has when this is a
        continuation, and ``shown_loop`` the kept copy of the loop in it (``rules.restate``);
        ``asked_up_to``: the largest count the request names (``detect.asked.largest_count``),
        None without a request (``rules.counted`` is then off); ``sections``: the small
        counts of sections the request asks for (``detect.asked.asked_sections``)."""
        self.channel = channel
        structural = channel == "text"
        # Held text: two maximal periods (a run is compared one period back, and new periods are
        # searched one period back) plus room for a paragraph probe.
        keep = 2 * cfg.cycleMaxPeriod + cfg.paragraphMinChars + 4 * STRIDE
        # numbers a counter's copies may change: a line before its loop that changed more is
        # no near-copy of it
        self._counter_moves = cfg.counterMaxChangingNumbers
        self._win = TextWindow(keep)
        rules = build_rules(
            RuleContext(channel, cfg, asked, correction, shown, shown_loop, asked_up_to, sections)
        )
        self._rules = rules
        self._window_rules: list[Rule] = []  # the rules that judge the window, in order
        self._holding_rules: list[Rule] = []  # the rules with a watermark
        takers: dict[str, Rule] = {}  # the segmenter's feeds
        clauses: list[Rule] = []  # (the feeds several rules may take)
        code: list[Rule] = []
        # (one short pass: a channel is made for every stream, and again after every cut)
        for rule in rules:
            for feed in rule.feeds():
                if feed == CHECKPOINT:
                    self._window_rules.append(rule)
                elif feed == WATERMARK:
                    self._holding_rules.append(rule)
                elif feed == CLAUSES:
                    clauses.append(rule)
                elif feed == CODE_LINE:
                    code.append(rule)
                elif feed in takers:
                    raise ValueError(f"two rules take the segmenter's {feed!r} feed")
                else:
                    takers[feed] = rule
        # a sentence with this many chars cannot normalise to a phrase (edges are short)
        # (a continuation goes on from the shown answer: inside its code block, if it was cut
        # in one)
        self._segmenter = _segmenter(
            structural,
            takers,
            clauses,
            code,
            4 * cfg.poolMaxPhraseChars + 64,
            ends_in_fence(shown),
        )
        self._done = 0  # offset up to which every rule has run
        self.wait_until = STRIDE  # feed runs the rules once more than this has arrived
        self.hit: Hit | None = None
        self._reported = False
        self._released = 0  # the furthest watermark given: text up to it may have gone out

    def rule(self, name: str) -> Rule:
        """The rule whose hits are named ``name``."""
        for rule in self._rules:
            if name in rule.names():
                return rule
        raise KeyError(name)

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
            if hit is not None:
                hit = self._settle(hit)
            self.hit = (
                extend_over_near_copies(win, hit, self._segmenter.fenced, self._counter_moves)
                if hit is not None
                else None
            )
        win.trim(self._done)
        self._segmenter.forget_fences_before(win.base)

    def _checkpoint(self, cp: int, final: bool) -> Hit | None:
        win = self._win
        segmenter = self._segmenter
        hit = segmenter.scan_to(win, cp, final)
        if hit is None:
            for rule in self._window_rules:
                hit = rule.at_checkpoint(win, cp, final, segmenter)
                if hit is not None:
                    break
        if hit is None:
            return None
        return extend_over_near_copies(
            win, self._settle(hit), segmenter.fenced, self._counter_moves
        )

    def _settle(self, hit: Hit) -> Hit:
        """The hit as the rule that made it settles it, given the other rules. A rule does
        not know what went out past its cut (one that holds nothing back, or a handful of
        clauses whose second unit went out before its clauses came back): the channel does
        (the watermark it gave last), and counts that as the hit's lead-in."""
        rule = self.rule(hit.rule)
        hit = rule.settle(self._win, hit, self._rules)
        if self._released > hit.prune_offset + hit.lead_in:
            hit = replace(hit, lead_in=self._released - hit.prune_offset)
        return hit

    def safe_offset(self) -> int:
        """Chars of this channel that no future hit can prune (a proxy may release them)."""
        if self.hit is None:
            self._advance(final=False, eager=True)
        if self.hit is not None:
            # the rule's own cut: what was released before the hit never passes it
            return self.hit.prune_offset + self.hit.lead_in
        win, segmenter = self._win, self._segmenter
        rules = self._holding_rules
        held = rules[0].safe_offset(win, segmenter)
        for i in range(1, len(rules)):
            # (two-argument mins: compiled, they compare native ints)
            held = min(held, rules[i].safe_offset(win, segmenter))
        self._released = max(self._released, held)
        return held
