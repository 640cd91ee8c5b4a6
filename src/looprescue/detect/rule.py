"""What a rule offers the channel detector, and what the detector tells it.

A rule is a class derived from ``Rule``. It says which hits it makes (``names``) and which
feeds it takes (``feeds``), and overrides the entry points of those feeds:

* the segmenter's units, as they end, in offset order: ``on_unit`` (every sentence or line,
  raw), ``on_clauses`` (a sentence of prose, to look inside it), ``on_sentence`` (a sentence
  of prose, as a phrase), ``on_open_sentence`` (the sentence being written, after each scan),
  ``on_line`` (a line that is no structure), ``on_line_start``, ``on_row`` and ``end_table``
  (markdown table rows), ``on_item`` (numbered list lines), ``on_code_line`` and
  ``end_fence`` (lines inside a ``` fence, and the end of each fence line). The segmenter
  takes one rule per feed, but for ``on_clauses`` and the fenced lines, which the channel
  hands to each rule that takes them;
* ``at_checkpoint``: the window, every ``limits.STRIDE`` chars at absolute offsets;
* ``safe_offset``: the watermark, the earliest offset a future hit of the rule could prune
  (``WATERMARK``; a rule whose hits another rule's watermark covers takes no part).

After a hit the channel asks the rule that made it to ``settle`` it (move its cut, given the
other rules), then walks the cut back over near-copies (``nearcopy``). A rule has no reset: a
channel started afresh builds its rules again (``registry.build_rules``).

A plain base class rather than a ``typing.Protocol``: compiled with mypyc, a call through a
native base class is a vtable call, a call through a protocol a Python attribute lookup.
"""

from __future__ import annotations

from typing import Final

from looprescue.detect.buffer import TextWindow, ended_lines
from looprescue.detect.hits import Hit
from looprescue.detect.segment import Segmenter

# The feeds a rule can take (``Rule.feeds``).
UNIT: Final = "unit"
CLAUSES: Final = "clauses"
SENTENCE: Final = "sentence"
OPEN_SENTENCE: Final = "open_sentence"
LINE: Final = "line"
LINE_START: Final = "line_start"
ROW: Final = "row"
ITEM: Final = "item"
CODE_LINE: Final = "code_line"
CHECKPOINT: Final = "checkpoint"
WATERMARK: Final = "watermark"
FEEDS: Final = frozenset(
    {
        UNIT,
        CLAUSES,
        SENTENCE,
        OPEN_SENTENCE,
        LINE,
        LINE_START,
        ROW,
        ITEM,
        CODE_LINE,
        CHECKPOINT,
        WATERMARK,
    }
)


class Rule:
    """One rule of one channel. Every entry point but ``names`` and ``feeds`` is called only
    when the rule takes its feed; the defaults here are never reached then."""

    def names(self) -> tuple[str, ...]:
        """The ``Hit.rule`` values of the hits this rule makes."""
        raise NotImplementedError

    def feeds(self) -> frozenset[str]:
        """Which of ``FEEDS`` the rule takes."""
        raise NotImplementedError

    # -- the segmenter's feeds ----------------------------------------------------------------
    def on_unit(self, win: TextWindow, begin: int, end: int) -> Hit | None:
        raise NotImplementedError

    def on_clauses(self, sentence: str, start: int, end: int) -> Hit | None:
        raise NotImplementedError

    def on_sentence(self, sentence: str, start: int, end: int) -> Hit | None:
        raise NotImplementedError

    def on_open_sentence(self, win: TextWindow, sentence_from: int, stop: int) -> Hit | None:
        raise NotImplementedError

    def on_line(self, line: str, start: int, end: int) -> Hit | None:
        raise NotImplementedError

    def on_line_start(self, offset: int) -> None:
        raise NotImplementedError

    def on_row(self, row: str, start: int, end: int) -> Hit | None:
        raise NotImplementedError

    def end_table(self) -> None:
        raise NotImplementedError

    def on_item(self, line: str, start: int, end: int) -> Hit | None:
        raise NotImplementedError

    def on_code_line(self, line: str, start: int, end: int) -> Hit | None:
        raise NotImplementedError

    def end_fence(self, end: int) -> None:
        raise NotImplementedError

    # -- the window ---------------------------------------------------------------------------
    def at_checkpoint(
        self, win: TextWindow, cp: int, final: bool, segmenter: Segmenter
    ) -> Hit | None:
        """Judge the text up to ``cp`` (the char at ``cp`` has arrived unless ``final``: the
        text ends there)."""
        raise NotImplementedError

    # -- the watermark ------------------------------------------------------------------------
    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """The earliest offset a future hit of this rule could prune."""
        raise NotImplementedError

    # -- after a hit --------------------------------------------------------------------------
    def batch_onset(self) -> int | None:
        """Where a batch of short units this rule holds back began, if one may be forming
        (a periodic loop that settled out of it is cut there)."""
        return None

    def settle(self, win: TextWindow, hit: Hit, rules: list[Rule]) -> Hit:
        """This rule's hit, its cut moved where the rules together say the loop began."""
        return hit


class LineRule(Rule):
    """A rule that reads every line once, at the checkpoint after it ends (its ``CHECKPOINT``
    feed): the lines come from ``buffer.ended_lines``, one read shared by all such rules at a
    checkpoint. A subclass judges them in ``on_ended_line``."""

    def __init__(self) -> None:
        self._read = 0  # lines that begin before this offset were read

    def at_checkpoint(
        self, win: TextWindow, cp: int, final: bool, segmenter: Segmenter
    ) -> Hit | None:
        for line, start, end in ended_lines(win, max(self._read, win.base), cp, final):
            self._read = end
            hit = self.on_ended_line(line, start, end, cp, segmenter)
            if hit is not None:
                return hit
        return None

    def on_ended_line(
        self, line: str, start: int, end: int, cp: int, segmenter: Segmenter
    ) -> Hit | None:
        """Judge a line, its line break included, that ended by checkpoint ``cp``."""
        raise NotImplementedError
