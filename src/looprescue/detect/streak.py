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

A batch also repeats itself soon: within ``repeat_within`` units of its onset, a unit repeats
an earlier one (a rotation of a handful of phrases comes back to them within a few sentences).
Healthy short sentences do not, so they are released after that many at most.

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
from typing import Final

from looprescue.detect import tally

# Repeats a batch shows within its first ``repeat_within`` units: a rotation of a handful of
# phrases comes back to them at once; a healthy run of short sentences repeats once by chance.
REPEATS_SOON: Final = 1


class UnitRun:
    __slots__ = (
        "_counts",
        "_coverage",
        "_first_repeats",
        "_horizon",
        "_max_members",
        "_repeat_within",
        "_score",
        "_units",
    )

    def __init__(self, coverage: float, max_members: int, horizon: int, repeat_within: int) -> None:
        self._coverage = coverage
        self._max_members = max_members
        self._horizon = horizon
        self._repeat_within = repeat_within
        # (key or None when it can never be a member, start) from the candidate on
        self._units: deque[tuple[str | None, int]] = deque()
        self._counts: dict[str, int] = {}  # of the member keys in _units
        self._score = 0.0  # CUSUM from the candidate, counting every possible member as one
        # the candidate's first units are all there and repeat soon: true until it is dropped
        self._first_repeats = False

    def add(self, key: str | None, start: int, barrier: bool = False) -> None:
        """A complete unit: ``key`` is its normalised text when it may be a member, None when it
        cannot (a long unit that repeats one of the run: loop text, but no phrase). A new long
        unit is a ``barrier``: the run ends there."""
        units, counts = self._units, self._counts
        if barrier:
            if units:
                units.clear()
                counts.clear()
                self._score = 0.0
                self._first_repeats = False
            return
        if not units and key is None:
            return  # a run starts with a unit that may be a member
        units.append((key, start))
        if key is not None:
            tally.add(counts, key)
            self._score += 1.0 - self._coverage
        else:
            self._score -= self._coverage
        if len(units) > self._horizon:
            self._drop_first()
        # the candidate may have died: most runs are short and most units fit, so check cheaply
        while units and (
            self._score < 0.0
            or (
                len(units) > self._repeat_within
                and not (self._first_repeats or self._first_repeat_soon())
            )
            or (len(counts) > self._max_members and not self._may_reach_coverage())
        ):
            self._drop_first()

    def _first_repeat_soon(self) -> bool:
        # asked once the candidate's first repeat_within + 1 units are in: they never change
        # while it stays the candidate, so a yes is kept (add asks only until then)
        self._first_repeats = self._repeats_soon(0)
        return self._first_repeats

    def _drop_first(self) -> None:
        self._first_repeats = False
        key, _ = self._units.popleft()
        if key is not None:
            tally.drop(self._counts, key)
        # the CUSUM from the new candidate: recomputed, the run is short (at most the horizon)
        score, c = 0.0, self._coverage
        for unit_key, _ in self._units:
            score += (1.0 - c) if unit_key is not None else -c
            if score < 0.0:
                break
        self._score = score
        while self._units and self._units[0][0] is None:
            self._drop_first()  # a candidate is a unit that may be a member

    def _repeats_soon(self, first: int) -> bool:
        """Whether units repeat earlier ones at least ``REPEATS_SOON`` times within
        ``repeat_within`` units of unit ``first`` (or too few units have come yet to tell)."""
        units, size = self._units, self._repeat_within + 1
        if len(units) - first < size:
            return True
        keys = [units[k][0] for k in range(first, first + size) if units[k][0] is not None]
        return len(keys) - len(set(keys)) >= REPEATS_SOON

    def _may_reach_coverage(self) -> bool:
        counts = self._counts
        if len(counts) <= self._max_members:
            return True  # every unit so far could be a member
        best = sum(heapq.nlargest(self._max_members, counts.values()))
        return best >= self._coverage * len(self._units)

    def recurring_share(self) -> tuple[int, int, int]:
        """Units of the run whose key recurs in it, all units, and how many keys recur."""
        covered = phrases = 0
        for n in self._counts.values():
            if n >= 2:
                covered += n
                phrases += 1
        return covered, len(self._units), phrases

    def has_recurring(self) -> bool:
        """Whether a key occurs twice or more in the run (with none, no batch has formed)."""
        return any(n >= 2 for n in self._counts.values())

    def recurring(self) -> set[str]:
        """The keys that occur twice or more in the run."""
        return {key for key, n in self._counts.items() if n >= 2}

    def keys(self) -> list[str | None]:
        """The run's units' keys, oldest first."""
        return [key for key, _ in self._units]

    def hold_from(self) -> int | None:
        """Start of the earliest unit a future onset could be, or None when there is none."""
        return self._units[0][1] if self._units else None

    def onset(self, members: set[str] | frozenset[str]) -> int | None:
        """Start of the earliest member unit from which members keep the coverage up to now."""
        c = self._coverage
        units = self._units
        n = len(units)
        size = self._repeat_within + 1
        # Whether units repeat soon after unit i (see _repeats_soon), for every i in one
        # backward pass: nearest[i] is the index of the next unit with unit i's key, so the
        # units from i on hold a repeat within ``size`` when some nearest[k] for k in that
        # stretch falls inside it.
        never = n + size
        nearest = [never] * n
        following: dict[str, int] = {}
        gain, loss = 1.0 - c, -c
        total = 0.0  # the running sum from unit i on, floored at zero after each later unit
        best = None
        # Walk backwards: a start i holds when no partial sum from i onwards goes below zero.
        i = n
        for key, start in reversed(units):
            i -= 1
            carry = total if total < 0.0 else 0.0
            if key is None:
                total = loss + carry
                continue
            nearest[i] = following.get(key, never)
            following[key] = i
            if key in members:
                total = gain + carry
                if total >= 0.0 and (n - i < size or _repeats_in(nearest, i, size)):
                    best = start
            else:
                total = loss + carry
        return best

    def __len__(self) -> int:
        return len(self._units)


def _repeats_in(nearest: list[int], first: int, size: int) -> bool:
    """``UnitRun._repeats_soon`` from the next-occurrence indexes of the units."""
    limit = first + size
    window = nearest[first:limit]
    if REPEATS_SOON == 1:
        return min(window) < limit
    return sum(1 for k in window if k < limit) >= REPEATS_SOON


class RepeatStreak:
    """A running streak of repeated units: it starts at a unit seen before and lasts while
    repeats make up ``coverage`` of the units since (a CUSUM: +1-coverage per repeat, -coverage
    per other unit; below zero the streak is over, for good). Text before the current streak
    start is never cut at a repeat, which is what lets a watermark release it."""

    __slots__ = ("_coverage", "_score", "start")

    def __init__(self, coverage: float) -> None:
        self._coverage = coverage
        self._score = 0.0
        self.start: int | None = None

    def add(self, repeat: bool, offset: int) -> None:
        if repeat:
            if self.start is None:
                self.start, self._score = offset, 0.0
            self._score += 1.0 - self._coverage
        elif self.start is not None:
            self._score -= self._coverage
            if self._score < 0.0:
                self.start, self._score = None, 0.0
