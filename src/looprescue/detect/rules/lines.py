"""Rule ``lines``: many short lines that keep duplicating.

Over the last ``linesWindow`` counted lines, a median length of at most ``linesMaxMedianChars``
and at least ``linesMinDuplicateRatio`` of lines having an exact duplicate in the window gives a
warning; a second matching window at least ``linesConfirmGap`` lines later confirms, and only a
confirmation fires. The two-window confirmation is what keeps refrains, checklists and logs
with a recurring short line from firing: those recover, a loop does not.
"""

from __future__ import annotations

from collections import deque

from looprescue.config import DetectorConfig
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.streak import FirstChars, RepeatStreak
from looprescue.detect.text import excerpt


class LinesRule:
    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        self._channel = channel
        self._size = cfg.linesWindow
        self._max_median = cfg.linesMaxMedianChars
        self._need = cfg.linesMinDuplicateRatio * cfg.linesWindow
        self._gap = cfg.linesConfirmGap
        self._window: deque[tuple[str, int]] = deque()
        self._counts: dict[str, int] = {}
        self._duplicated = 0  # window lines that have a duplicate in the window
        self._short = 0  # window lines no longer than the median limit
        self._seen = 0  # lines counted so far
        self._warned_at: int | None = None
        self._streak = RepeatStreak(cfg.linesMinDuplicateRatio)
        self._first_chars = FirstChars()  # of the lines in the window

    def on_line(self, line: str, start: int, end: int) -> Hit | None:
        repeat = line in self._counts
        self._streak.add(repeat, start)
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
        if self._seen - self._warned_at >= self._gap and self._streak.start is not None:
            return self._hit(end)
        return None

    def _add(self, line: str, start: int) -> None:
        self._window.append((line, start))
        self._first_chars.add(line)
        n = self._counts.get(line, 0) + 1
        self._counts[line] = n
        self._duplicated += 2 if n == 2 else (1 if n > 2 else 0)
        if len(line) <= self._max_median:
            self._short += 1

    def _remove(self, line: str, _start: int) -> None:
        self._first_chars.remove(line)
        n = self._counts[line] - 1
        if n:
            self._counts[line] = n
        else:
            del self._counts[line]
        self._duplicated -= 2 if n == 1 else (1 if n >= 2 else 0)
        if len(line) <= self._max_median:
            self._short -= 1

    def _hit(self, end: int) -> Hit:
        dups = sorted(
            (ln for ln, n in self._counts.items() if n >= 2), key=lambda ln: -self._counts[ln]
        )[:6]
        prune = self._window[0][1] if self._streak.start is None else self._streak.start
        return Hit(
            rule="lines",
            channel=self._channel,
            prune_offset=prune,
            loop_start=prune,
            fired_at=end,
            repeats=round(self._duplicated / max(1, len(dups)), 2),
            period=None,
            evidence=excerpt(" / ".join(dups)),
        )

    def safe_offset(self, tail: str, tail_start: int, end: int) -> int:
        if self._streak.start is not None:
            return self._streak.start
        head = tail.strip()
        if (
            head
            and head[0] in self._first_chars
            and any(line.startswith(head) for line in self._counts)
        ):
            return tail_start + (len(tail) - len(tail.lstrip()))
        return end
