"""Rule ``rows``: a markdown table keeps drawing its rows from a handful of rows it already has.

A real table describes a different thing in every row; a degenerate one (a small model asked
for a timetable) repeats rows it wrote already, in no fixed order, so neither ``cycle`` nor
``counter`` sees a period, and table rows are structure that the phrase pool never counts. Over
the last ``ROW_WINDOW`` rows of one table, at least ``ROW_COVERAGE`` of them repeating at most
``ROW_DISTINCT`` distinct rows is that loop.

Not a loop: a table whose rows differ (cells may repeat, ``| yes | yes | no |``, but each row
names its own thing), a table that says a row twice among many new ones (under ``ROW_COVERAGE``
of the window), a table of more than ``ROW_DISTINCT`` rows said again (a table restated in
full is ``cycle``'s to judge, with its copies), and rows inside a code fence.

Prune point: the first row of the current streak of repeated rows (a CUSUM: +1-coverage per
repeated row, -coverage per new one), so the table's first rows are kept, as a cycle keeps its
first copy; that is what lets a table stream as it comes: only a row that repeats an earlier
one of its table is held back.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.rule import ROW, WATERMARK, Rule
from looprescue.detect.segment import Segmenter
from looprescue.detect.text import excerpt

_FEEDS: Final = frozenset({ROW, WATERMARK})

ROW_WINDOW: Final = 20
ROW_COVERAGE: Final = 0.75
ROW_DISTINCT: Final = 6


class TableRowsRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("rows",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._window: deque[str] = deque()
        self._counts: dict[str, int] = {}
        self._repeated = 0  # window rows whose text occurs earlier in the window or table
        self._seen: set[str] = set()  # rows of the current table
        self._streak_start: int | None = None
        self._score = 0.0
        self._free_line = -1  # start of the line being written once it can match no row

    def end_table(self) -> None:
        """A line that is not a table row: the table, and any streak in it, is over."""
        if self._seen:
            self._window.clear()
            self._counts.clear()
            self._seen.clear()
            self._repeated = 0
            self._streak_start = None
            self._score = 0.0

    def on_row(self, row: str, start: int, end: int) -> Hit | None:
        key = " ".join(row.split())
        repeat = key in self._seen
        self._seen.add(key)
        # the streak of repeated rows (CUSUM: +1-coverage per repeat, -coverage otherwise)
        if repeat:
            if self._streak_start is None:
                self._streak_start, self._score = start, 0.0
            self._score += 1.0 - ROW_COVERAGE
        elif self._streak_start is not None:
            self._score -= ROW_COVERAGE
            if self._score < 0.0:
                self._streak_start, self._score = None, 0.0
        window = self._window
        window.append(key if repeat else "")
        if repeat:
            self._repeated += 1
            self._counts[key] = self._counts.get(key, 0) + 1
        if len(window) > ROW_WINDOW:
            old = window.popleft()
            if old:
                self._repeated -= 1
                left = self._counts[old] - 1
                if left:
                    self._counts[old] = left
                else:
                    del self._counts[old]
        if (
            len(window) == ROW_WINDOW
            and self._repeated >= ROW_COVERAGE * ROW_WINDOW
            and len(self._counts) <= ROW_DISTINCT
            and self._streak_start is not None
        ):
            rows = sorted(self._counts, key=lambda r: (-self._counts[r], r))
            return Hit(
                rule="rows",
                channel=self._channel,
                prune_offset=self._streak_start,
                loop_start=self._streak_start,
                fired_at=end,
                repeats=float(self._repeated),
                period=None,
                evidence=excerpt(" / ".join(rows[:4])),
            )
        return None

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """A repeated row may be the start of the loop: hold from the streak, or the row being
        written when it begins like a row the table has already."""
        line_start, end = segmenter.line_from, win.end
        if self._streak_start is not None:
            return self._streak_start
        if not self._seen or line_start == self._free_line:
            return end
        line_tail = win.slice(line_start, end)
        head = " ".join(line_tail.split())
        if not head:
            return end
        if head.startswith("|") and any(row.startswith(head) for row in self._seen):
            return line_start + (len(line_tail) - len(line_tail.lstrip()))
        # no row of the table begins so (rows are only added at a line's end): nor will it
        self._free_line = line_start
        return end
