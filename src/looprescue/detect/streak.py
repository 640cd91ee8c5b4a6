"""The run of short units (sentences or lines) a phrase-pool loop can be made of.

A pool loop is cut where its batch of phrases first appeared, so none of its phrases reach a
client. That needs two answers from the same state:

* ``onset(members)``, when a rule fires: the earliest member unit from which the members keep
  making up at least ``coverage`` of the units up to now (a CUSUM that never dips below zero:
  +1-coverage per member, -coverage per other unit). A batch's first appearances hold phrases
  that never come back, so a pool's coverage is met loosely at its start; a lone "OK." several
  sentences before it does not belong to it.
* ``hold_from()``, at any time: the earliest offset such an onset could still have, whatever
  comes next, so a proxy can release everything before it.

What makes the second answer cheap and honest: a new long unit (one that can never be a member)
is a barrier, so an onset is always inside the current run of short units (a long unit that
repeats one of the run is loop text itself, and only counts as a non-member); and members are
at most ``max_members`` distinct units, so a start whose run holds too many different units to
reach the coverage with any such set can never be an onset again. Such a start is dropped for
good, and the next one is tried. The run keeps at most ``horizon`` units: an onset is looked
for among those, so nothing older needs holding.
"""

from __future__ import annotations

import heapq
from collections import deque


class UnitRun:
    __slots__ = ("_counts", "_coverage", "_horizon", "_max_members", "_units")

    def __init__(self, coverage: float, max_members: int, horizon: int) -> None:
        self._coverage = coverage
        self._max_members = max_members
        self._horizon = horizon
        self._units: deque[tuple[str, int]] = deque()  # (key, start) from the candidate on
        self._counts: dict[str, int] = {}  # of the keys in _units

    def add(self, key: str | None, start: int) -> None:
        """A complete unit: ``key`` is its normalised text, None for a new long unit (a
        barrier). A repeated long unit is added under a key no member set holds."""
        units, counts = self._units, self._counts
        if key is None:
            if units:
                units.clear()
                counts.clear()
            return
        units.append((key, start))
        counts[key] = counts.get(key, 0) + 1
        if len(units) > self._horizon:
            self._drop_first()
        if len(counts) > self._max_members:  # else every unit so far could be a member
            while units and not self._may_reach_coverage():
                self._drop_first()

    def _drop_first(self) -> None:
        key, _ = self._units.popleft()
        left = self._counts[key] - 1
        if left:
            self._counts[key] = left
        else:
            del self._counts[key]

    def _may_reach_coverage(self) -> bool:
        counts = self._counts
        if len(counts) <= self._max_members:
            return True  # every unit so far could be a member
        best = sum(heapq.nlargest(self._max_members, counts.values()))
        return best >= self._coverage * len(self._units)

    def hold_from(self) -> int | None:
        """Start of the earliest unit a future onset could be, or None when there is none."""
        return self._units[0][1] if self._units else None

    def onset(self, members: set[str] | frozenset[str]) -> int | None:
        """Start of the earliest member unit from which members keep the coverage up to now."""
        c = self._coverage
        total = 0.0
        suffix_min = 0.0  # min over later prefixes of the running sum, relative to here
        best = None
        # Walk backwards: a start i holds when no partial sum from i onwards goes below zero.
        for key, start in reversed(self._units):
            step = (1.0 - c) if key in members else -c
            total = step + min(0.0, suffix_min)
            suffix_min = total
            if key in members and total >= 0.0:
                best = start
        return best

    def __len__(self) -> int:
        return len(self._units)


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
