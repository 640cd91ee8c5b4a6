"""Rule ``rows``: a markdown table keeps drawing its rows from a handful of rows it already has.

A real table describes a different thing in every row; a degenerate one (a small model asked
for a timetable) repeats rows it wrote already, in no fixed order, so neither ``cycle`` nor
``counter`` sees a period, and table rows are structure that the phrase pool never counts. Over
the last ``ROW_WINDOW`` rows of one table, at least ``ROW_COVERAGE`` of them repeating at most
``ROW_DISTINCT`` distinct rows is that loop; so are rows said again with no new row between
that go round the same few rows twice (``ROUND_ROWS`` or more: the table written a third
time). A model that goes round its rows says a cell another way now and then (``西湖``, then
``西湖、灵隐寺``): a row with the name of an earlier one (its first cell), after a row of
another name, that differs from it in one cell sharing a word, counts as that row.

Not a loop: a table whose rows differ (cells may repeat, ``| yes | yes | no |``, but each row
names its own thing), a table that says a row twice among many new ones (under ``ROW_COVERAGE``
of the window), a table of more than ``ROW_DISTINCT`` rows said again (a table restated in
full is ``cycle``'s to judge, with its copies), and rows inside a code fence. Nor are rows of
one name together (a support matrix, a version a row) or rows whose changed cell says another
thing (``x86_64``, then ``aarch64``: a build matrix going round its systems once per
architecture).

Prune point: the first row of the current streak of repeated rows (a CUSUM: +1-coverage per
repeated row, -coverage per new one), so the table's first rows are kept, as a cycle keeps its
first copy; that is what lets a table stream as it comes: only a row that repeats an earlier
one of its table is held back.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Final

from looprescue.detect import tally
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.rule import ROW, WATERMARK, Rule
from looprescue.detect.segment import Segmenter
from looprescue.detect.text import excerpt

_FEEDS: Final = frozenset({ROW, WATERMARK})

ROW_WINDOW: Final = 20
ROW_COVERAGE: Final = 0.75
ROW_DISTINCT: Final = 6
# A row said again with one cell changed counts as the row it says again when the table has at
# least this many cells a row (its name and two more).
CELLS: Final = 3
# Rows said again since the last new row, going round a few rows twice, are a loop from this
# many rows (a table written a third time).
ROUND_ROWS: Final = 6
# A word of a cell: letters, or one CJK char.
_WORD: Final = re.compile(r"[^\W\d_]{2,}|[\u3040-\u30ff\u4e00-\u9fff]")
# Rows of one name remembered to compare with (a table that groups many rows under a name),
# and rows and names of one table remembered (the oldest go first).
MAX_SAME_NAME: Final = 16
MAX_ROWS: Final = 1024


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
        self._seen: dict[str, str] = {}  # rows of the current table, and the row each counts as
        # the rows of the current table by their first cell: (their cells, the row they count
        # as, their index in the table)
        self._by_name: dict[str, list[tuple[list[str], str, int]]] = {}
        self._rows = 0  # rows of the current table
        self._run: dict[str, int] = {}
        self._streak_start: int | None = None
        self._score = 0.0
        self._free_line = -1  # start of the line being written once it can match no row

    def end_table(self) -> None:
        """A line that is not a table row: the table, and any streak in it, is over."""
        if self._seen:
            self._window.clear()
            self._counts.clear()
            self._seen.clear()
            self._by_name.clear()
            self._run.clear()
            self._rows = 0
            self._repeated = 0
            self._streak_start = None
            self._score = 0.0

    def on_row(self, row: str, start: int, end: int) -> Hit | None:
        key = " ".join(row.split())
        said_as = self._seen.get(key)
        if said_as is None:
            said_as, repeat = self._as_said(key)
            if len(self._seen) >= MAX_ROWS:
                del self._seen[next(iter(self._seen))]  # (a long table: its oldest row)
            self._seen[key] = said_as
        else:
            self._rows += 1
            repeat = True
        key = said_as
        # the streak of repeated rows (CUSUM: +1-coverage per repeat, -coverage otherwise)
        if repeat:
            if self._streak_start is None:
                self._streak_start, self._score = start, 0.0
            self._score += 1.0 - ROW_COVERAGE
        elif self._streak_start is not None:
            self._score -= ROW_COVERAGE
            if self._score < 0.0:
                self._streak_start, self._score = None, 0.0
        # the rows said again since the last new one, by the row each counts as
        run = self._run
        if repeat:
            run[key] = run.get(key, 0) + 1
        else:
            run.clear()
        window = self._window
        window.append(key if repeat else "")
        if repeat:
            self._repeated += 1
            tally.add(self._counts, key)
        if len(window) > ROW_WINDOW:
            old = window.popleft()
            if old:
                self._repeated -= 1
                tally.drop(self._counts, old)
        if self._streak_start is not None and (
            (
                len(window) == ROW_WINDOW
                and self._repeated >= ROW_COVERAGE * ROW_WINDOW
                and len(self._counts) <= ROW_DISTINCT
            )
            or self._went_round()
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

    def _went_round(self) -> bool:
        """Whether the rows said again since the last new one went round the same few rows
        twice: each of them said again twice, at most ``ROW_DISTINCT`` of them and at least
        ``ROUND_ROWS`` rows in all (a table written a third time, one round in the window's
        time)."""
        run = self._run
        return (
            len(run) <= ROW_DISTINCT and sum(run.values()) >= ROUND_ROWS and min(run.values()) >= 2
        )

    def _as_said(self, key: str) -> tuple[str, bool]:
        """The row a table row counts as, and whether it says an earlier row again with one
        cell changed: the same name in its first cell, ``CELLS`` cells or more, all but one
        the same, and a row of another name between (``| 广州 | 1882万 | 早茶 |``, then
        ``| 广州 | 1873万 | 早茶 |`` after Shenzhen's: a table going round its rows again).
        Rows of one name in a row (``| Ubuntu | 20.04 |``, ``| Ubuntu | 22.04 |``) are a
        group, each naming its own thing."""
        index = self._rows
        self._rows += 1
        cells = [cell.strip() for cell in key.strip("|").split("|")]
        if len(cells) < CELLS:
            return key, False
        same_name = self._by_name.get(cells[0])
        if same_name is None:
            if len(self._by_name) >= MAX_ROWS:
                del self._by_name[next(iter(self._by_name))]
            same_name = self._by_name[cells[0]] = []
        said_as, drifted = key, False
        for other, counted_as, at in same_name:
            if at < index - 1 and len(other) == len(cells) and _reworded(other, cells):
                said_as, drifted = counted_as, True
                break
        if len(same_name) < MAX_SAME_NAME:
            same_name.append((cells, said_as, index))
        return said_as, drifted

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


def _reworded(one: list[str], other: list[str]) -> bool:
    """Whether two rows of as many cells differ in one cell at most, said another way: the
    two share a word (``西湖``, ``西湖、灵隐寺``). A cell that says another thing (``x86_64``,
    then ``arm64``; ``3.11``, then ``3.12``) makes another row."""
    apart = -1
    for i, (a, b) in enumerate(zip(one, other, strict=True)):
        if a != b:
            if apart >= 0:
                return False
            apart = i
    return apart < 0 or not set(_WORD.findall(one[apart])).isdisjoint(_WORD.findall(other[apart]))
