"""Rule ``lines``: many short lines that keep duplicating.

Over the last ``linesWindow`` counted lines, a median length of at most ``linesMaxMedianChars``
and at least ``linesMinDuplicateRatio`` of lines having an exact duplicate in the window gives a
warning; a second matching window at least ``linesConfirmGap`` lines later confirms, and only a
confirmation fires.

Why it is a loop: a text whose lines are mostly copies of a few short lines, for two windows
apart, says nothing new line after line; the lines reshuffle, so no exact period shows it.

Not a loop: refrains, checklists and logs with a recurring short line: they repeat inside one
window but recover, and the two-window confirmation is what keeps them from firing. Nor a
derivation whose short word lines recur (``So:``): a formula or a line of code
(``text.notation``) is no line of a run, only one against it. Long lines (a median over
``linesMaxMedianChars``) are prose or data; fenced code in either channel, and in the visible
text list items, table rows and quotes, are structure the segmenter never hands to this rule.

Prune point: where the batch of duplicated lines first appeared (``UnitRun.onset``), among the
lines no longer than the median limit. A line of more than twice the limit ends the run (a new
structure line that long too, while no line of the run came twice); a batch
is at most a third of the window in distinct lines (more, and the window could not hold two of
each at the duplicate ratio).
"""

from __future__ import annotations

from collections import deque
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.limits import REPEAT_WITHIN
from looprescue.detect.rule import LINE, WATERMARK, Rule
from looprescue.detect.segment import Segmenter
from looprescue.detect.streak import UnitRun
from looprescue.detect.text import STRUCTURE_LINE, excerpt, notation

_FEEDS: Final = frozenset({LINE, WATERMARK})


class LinesRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("lines",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        self._channel = channel
        self._size: int = cfg.linesWindow
        self._max_median: int = cfg.linesMaxMedianChars
        self._max_line: int = 2 * cfg.linesMaxMedianChars
        self._need: float = cfg.linesMinDuplicateRatio * cfg.linesWindow
        self._gap: int = cfg.linesConfirmGap
        self._window: deque[tuple[str, int]] = deque()
        self._counts: dict[str, int] = {}
        self._duplicated = 0  # window lines that have a duplicate in the window
        self._short = 0  # window lines no longer than the median limit
        self._seen = 0  # lines counted so far
        self._warned_at: int | None = None
        self._free_line = -1  # start of an unfinished line too long to hold anything back
        self._run = UnitRun(
            cfg.linesMinDuplicateRatio,
            max(2, cfg.linesWindow // 3),
            2 * cfg.linesWindow,
            REPEAT_WITHIN,
        )

    def on_line(self, line: str, start: int, end: int) -> Hit | None:
        if line is STRUCTURE_LINE:
            # between the run's lines, and none of them; a long one ends a run in which nothing
            # came twice, as a long line does (see PoolRule.on_sentence; its length: the line,
            # its newline taken off)
            long = end - start - 1 > self._max_line
            self._run.add(None, start, barrier=long and not self._run.has_recurring())
            return None
        # a line up to the median limit may open (or carry) a held run; a longer short line,
        # or a formula or code (no line a run is made of), only counts against it; a long one
        # ends it
        if len(line) <= self._max_median and not notation(line):
            self._run.add(line, start)
        else:
            self._run.add(None, start, barrier=len(line) > self._max_line)
        self._add(line, start)
        self._seen += 1
        if len(self._window) > self._size:
            self._remove(*self._window.popleft())
        if len(self._window) < self._size:
            return None
        matches = self._short * 2 >= self._size and self._duplicated >= self._need
        if not matches:
            if self._warned_at is not None and self._seen - self._warned_at > 2 * self._size:
                self._warned_at = None  # recovered long ago: start over
            return None
        if self._warned_at is None:
            self._warned_at = self._seen
            return None
        if self._seen - self._warned_at >= self._gap:
            members = {ln for ln, n in self._counts.items() if n >= 2}
            onset = self._run.onset(members)
            if onset is not None:
                return self._hit(onset, end, members)
        return None

    def _ends_run(self, win: TextWindow, segmenter: Segmenter, end: int) -> bool:
        """Whether the unfinished line (up to ``end``) ends the run when it ends: a prose line
        or a new structure line already longer than ``_max_line`` is a barrier."""
        line_start = segmenter.line_from
        if end - line_start <= self._max_line:
            return False
        head = win.slice(line_start, end).strip()
        return len(head) > self._max_line and (
            segmenter.open_line_counts(win, end) or segmenter.open_structure_is_new(win, end)
        )

    def batch_onset(self) -> int | None:
        """Where the batch of short lines the text now ends in first appeared (see
        ``PoolRule.batch_onset``)."""
        return self._run.onset(self._run.recurring())

    def _add(self, line: str, start: int) -> None:
        self._window.append((line, start))
        n = self._counts.get(line, 0) + 1
        self._counts[line] = n
        self._duplicated += 2 if n == 2 else (1 if n > 2 else 0)
        if len(line) <= self._max_median:
            self._short += 1

    def _remove(self, line: str, _start: int) -> None:
        n = self._counts[line] - 1
        if n:
            self._counts[line] = n
        else:
            del self._counts[line]
        self._duplicated -= 2 if n == 1 else (1 if n >= 2 else 0)
        if len(line) <= self._max_median:
            self._short -= 1

    def _hit(self, onset: int, end: int, members: set[str]) -> Hit:
        dups = sorted(members, key=lambda ln: (-self._counts[ln], ln))[:6]
        return Hit(
            rule="lines",
            channel=self._channel,
            prune_offset=onset,
            loop_start=onset,
            fired_at=end,
            repeats=round(self._duplicated / max(1, len(members)), 2),
            period=None,
            evidence=excerpt(" / ".join(dups)),
        )

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        line_start, end = segmenter.line_from, win.end
        if line_start == self._free_line:
            return end
        held = self._run.hold_from()
        if held is not None:
            if not self._run.has_recurring() and self._ends_run(win, segmenter, end):
                # A run with no line said twice, and a prose line being written that ends it
                # when it ends (a barrier): no hit of this rule can fire before that line ends,
                # and none after it can reach back, nor a periodic loop settle into a batch
                # that has not formed. A heading goes out while the paragraph under it streams.
                self._free_line = line_start
                return end
            return held
        tail = win.slice(line_start, end)
        head = tail.strip()
        if head and len(head) <= self._max_median and not notation(head):
            return line_start + (len(tail) - len(tail.lstrip()))  # it may still open a run
        if head:
            # a line only grows: too long to be held, or notation, for good
            self._free_line = line_start
        return end
