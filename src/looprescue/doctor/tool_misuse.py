"""tool-misuse: the agent keeps failing at the same thing, turn after turn.

A failure stands until the agent succeeds at that same call (same tool, same canonical
arguments); a success of the tool with other arguments leaves it standing, so reading other
files does not excuse reading a missing one again and again. Two standing failures are the same
thing when they share the call, or the tool and the cause of the error (the logged error code,
else the masked result). Such a group of failures spread over two turns or more is misuse.

Reported once per tool at the end of the log, attributed to the last turn it failed in.
Evidence = the failed reuses: every failure of the group after its first, call and result.
A success is never evidence; crash-repair results count neither way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from looprescue.config import DoctorConfig
from looprescue.doctor.fold import Failure, FailureKey, FailureTracker
from looprescue.doctor.signals import TOOL_MISUSE, DetourSignal


class _Group:
    """Standing failures of one tool that are the same thing (shared call or shared cause)."""

    def __init__(self, failures: list[Failure], cap: int) -> None:
        failures.sort(key=lambda f: f.first_order)
        self.failures = failures
        self.count = sum(f.count for f in failures)
        self.turns = {turn for f in failures for turn in f.turns}
        self.latest = max(failures, key=lambda f: f.last_order)
        # every failure after the group's first is a reuse
        reuses = [s for f in failures[1:] for s in f.first_seqs]
        reuses += [s for f in failures for s in f.later.seqs]
        self.reuses = sorted(reuses)[:cap]


def _same_thing_groups(failures: Iterable[tuple[FailureKey, Failure]], cap: int) -> list[_Group]:
    """Connected groups: failures linked by the same arguments or by the same cause."""
    items = list(failures)
    parent = list(range(len(items)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_with: dict[tuple[str, bytes], int] = {}
    for i, ((_name, args, cause), _failure) in enumerate(items):
        for link in (("args", args), ("cause", cause)):
            j = first_with.setdefault(link, i)
            parent[root(i)] = root(j)
    members: dict[int, list[Failure]] = defaultdict(list)
    for i, (_key, failure) in enumerate(items):
        members[root(i)].append(failure)
    return [_Group(group, cap) for group in members.values()]


class ToolMisuseRule:
    """Reports the fold's standing failures (``fold.FailureTracker``) at the end of a log."""

    def __init__(self, config: DoctorConfig, failures: FailureTracker) -> None:
        self._min = config.toolErrorMin
        self._cap = config.maxEvidence
        self._tracker = failures

    @property
    def tracked(self) -> int:
        return len(self._tracker.failures)

    def finish(self) -> list[DetourSignal]:
        by_tool: dict[str, list[tuple[FailureKey, Failure]]] = defaultdict(list)
        for key, failure in self._tracker.failures.items():
            by_tool[key[0]].append((key, failure))
        signals = []
        for name, failures in by_tool.items():
            misused = [
                group
                for group in _same_thing_groups(failures, self._cap)
                if group.count >= self._min and len(group.turns) >= 2
            ]
            if misused:
                signals.append(self._signal(name, misused))
        signals.sort(key=lambda s: (s.turn if s.turn is not None else -1, s.sub))
        return signals

    def _signal(self, name: str, groups: list[_Group]) -> DetourSignal:
        latest = max((group.latest for group in groups), key=lambda f: f.last_order)
        count = sum(group.count for group in groups)
        turns = sorted(t for group in groups for t in group.turns if t is not None)
        span = f" from turn {turns[0]} to turn {turns[-1]}" if turns else " in several turns"
        codes = sorted({f.code for group in groups for f in group.failures if f.code})
        shown = ", ".join(codes[:3]) + (", …" if len(codes) > 3 else "")
        cause = f" ({shown})" if codes else ""
        return DetourSignal(
            kind=TOOL_MISUSE,
            sub=name,
            turn=latest.turns[1],
            metric=count,
            explanation=f"{name} failed {count} times{span}{cause} and the failing call never "
            f"succeeded afterwards (toolErrorMin {self._min})",
            evidence=tuple(sorted(s for group in groups for s in group.reuses)[: self._cap]),
        )
