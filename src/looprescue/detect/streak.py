"""A running streak of suspicious units (sentences or lines), shared by the pool and lines rules.

A streak starts at a suspicious unit and lasts while suspicious units make up at least
``coverage`` of the units since its start (a CUSUM: +1-coverage per suspicious unit,
-coverage per other unit; below zero the streak is over). Once over, a streak never resumes,
so text before the current streak start can never be pruned by these rules: that is what lets
the detector promise a "safe" watermark.
"""

from __future__ import annotations


class RepeatStreak:
    __slots__ = ("_coverage", "_score", "start")

    def __init__(self, coverage: float) -> None:
        self._coverage = coverage
        self._score = 0.0
        self.start: int | None = None  # offset of the streak's first suspicious unit

    def add(self, suspicious: bool, offset: int) -> None:
        if suspicious:
            if self.start is None:
                self.start = offset
                self._score = 0.0
            self._score += 1.0 - self._coverage
        elif self.start is not None:
            self._score -= self._coverage
            if self._score < 0.0:
                self.start = None
                self._score = 0.0


class FirstChars:
    """Counts the first char of a multiset of strings: a one-lookup filter before asking
    whether any of them starts with a given text."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, text: str) -> None:
        if text:
            self._counts[text[0]] = self._counts.get(text[0], 0) + 1

    def remove(self, text: str) -> None:
        if text:
            left = self._counts[text[0]] - 1
            if left:
                self._counts[text[0]] = left
            else:
                del self._counts[text[0]]

    def __contains__(self, char: str) -> bool:
        return char in self._counts
