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


# Prefix index depth: enough to tell a fresh sentence from a recurring one within a few chars.
PREFIX_DEPTH = 8


class PrefixIndex:
    """Counts the first 1..PREFIX_DEPTH chars of a multiset of strings, so "could the text
    being written turn out to be one of them?" is a dict lookup, not a scan."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, text: str) -> None:
        counts = self._counts
        for i in range(1, min(len(text), PREFIX_DEPTH) + 1):
            key = text[:i]
            counts[key] = counts.get(key, 0) + 1

    def remove(self, text: str) -> None:
        counts = self._counts
        for i in range(1, min(len(text), PREFIX_DEPTH) + 1):
            key = text[:i]
            left = counts[key] - 1
            if left:
                counts[key] = left
            else:
                del counts[key]

    def may_start(self, head: str) -> bool:
        """False only if no indexed string starts with ``head`` (a cheap, exact filter for
        heads up to PREFIX_DEPTH chars; longer heads need the caller's full check)."""
        return head[:PREFIX_DEPTH] in self._counts
