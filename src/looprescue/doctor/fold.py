"""The tool-call fold: one pass over completed calls, shared by `doctor` and the proxy's guard.

A completed call is protocol-neutral (:class:`~looprescue.doctor.identity.CompletedCall`: tool,
normalised arguments, normalised result, failed or not). :class:`ToolCallFold` keeps three
live views of the calls seen so far, each in bounded memory:

* the current **run**: consecutive calls with one identity (same tool, arguments and result);
* the current **stretches**: for each width 2..maxWidth, the calls where call[i] == call[i-w]
  back to back (a cycle A,B,A,B,… never has two equal neighbours);
* the **standing failures**: each (call, cause) that failed, and how often, since that same
  call last succeeded.

`doctor` reports what the runs and stretches closed within a turn and the failures at the end
of a log (``repeat_calls.py``, ``tool_cycles.py``, ``tool_misuse.py``); the guard reads the live
views at the end of a request's history (``looprescue/guard``). The definitions live here once.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

from looprescue.doctor.identity import CompletedCall, digest
from looprescue.doctor.signals import Evidence

MIN_WIDTH = 2
# An error code is kept for the explanation only; a log may hold an absurd one.
_CODE_CHARS = 64

FailureKey = tuple[str, bytes, bytes]  # tool, canonical-arguments digest, cause digest


def has_smaller_period(unit: tuple) -> bool:
    """True when ``unit`` is itself a repetition of a shorter unit (then the shorter width,
    or the run for width 1, owns the finding)."""
    width = len(unit)
    return any(
        width % d == 0 and all(unit[i] == unit[i % d] for i in range(width))
        for d in range(1, width)
    )


def failure_cause(call: CompletedCall) -> bytes:
    """What went wrong: the logged error code when there is one (``FS_NOT_FOUND`` whatever the
    path), else the masked result (e.g. a command's output and exit code)."""
    if call.error_code is not None:
        return digest(f"error-code\x00{call.error_code}")
    return call.result_key or b""


# --------------------------------------------------------------------------- runs


class Run:
    """Consecutive calls with one identity."""

    __slots__ = ("evidence", "first", "identity", "length", "name")

    def __init__(self, call: CompletedCall, cap: int) -> None:
        self.identity = call.identity
        self.name = call.name
        self.first = call
        self.length = 1
        self.evidence = Evidence(cap)
        self.evidence.add(call.call_seq)


# --------------------------------------------------------------------------- cycles


class Stretch:
    """A periodic stretch of one width: every call after the first ``width`` equals the call
    ``width`` before it."""

    __slots__ = ("calls", "evidence", "matches", "names", "unit", "width")

    def __init__(self, cap: int, window: list[CompletedCall]) -> None:
        self.width = len(window)
        self.matches = 0
        self.unit = tuple(call.identity for call in window)
        self.names = tuple(call.name for call in window)
        self.calls = tuple(window)
        self.evidence = Evidence(cap)
        self.evidence.extend([c.call_seq for c in window if c.call_seq is not None])

    @property
    def length(self) -> int:
        """Calls in the stretch."""
        return self.matches + self.width

    @property
    def repeats(self) -> int:
        """Whole units in the stretch."""
        return self.length // self.width

    @property
    def primitive(self) -> bool:
        """False when the unit is a repetition of a shorter one (A,A or A,B,A,B)."""
        return not has_smaller_period(self.unit)


class CycleTracker:
    def __init__(self, max_width: int, cap: int) -> None:
        self._max_width = max_width
        self._cap = cap
        self._recent: deque[CompletedCall] = deque(maxlen=max_width)
        self.live: dict[int, Stretch] = {}

    def on_call(self, call: CompletedCall) -> list[Stretch]:
        """Extend or close each width's stretch; returns the stretches this call closed."""
        recent = self._recent
        closed = []
        for width in range(MIN_WIDTH, self._max_width + 1):
            if len(recent) >= width and recent[-width].identity == call.identity:
                stretch = self.live.get(width)
                if stretch is None:
                    stretch = Stretch(self._cap, list(recent)[-width:])
                    self.live[width] = stretch
                stretch.matches += 1
                stretch.evidence.add(call.call_seq)
            elif width in self.live:
                closed.append(self.live.pop(width))
        recent.append(call)
        return closed

    def close(self) -> list[Stretch]:
        closed = [self.live[width] for width in sorted(self.live)]
        self._recent.clear()
        self.live = {}
        return closed


# --------------------------------------------------------------------------- failures


class Failure:
    """One call failing for one cause, and every time it did so since it last succeeded."""

    __slots__ = ("code", "count", "first_order", "first_seqs", "last_order", "later", "turns")

    def __init__(self, call: CompletedCall, order: int, cap: int) -> None:
        self.code = call.error_code[:_CODE_CHARS] if call.error_code is not None else None
        self.count = 1
        self.first_order = self.last_order = order
        self.first_seqs = tuple(s for s in (call.call_seq, call.result_seq) if s is not None)
        self.later = Evidence(cap)
        # first and latest turn; turns only grow, so two values tell one turn from several
        self.turns: tuple[int | None, int | None] = (call.turn, call.turn)

    def again(self, call: CompletedCall, order: int) -> None:
        self.count += 1
        self.last_order = order
        self.later.add(call.call_seq)
        self.later.add(call.result_seq)
        self.turns = (self.turns[0], call.turn)


class FailureTracker:
    """Standing failures. A failure stands until the agent succeeds at that same call (same
    tool, same canonical arguments); a success of the tool with other arguments leaves it
    standing. Bounded: past ``max_failures`` the stalest failure is forgotten."""

    def __init__(self, max_failures: int, cap: int) -> None:
        self._max = max_failures
        self._cap = cap
        self._order = 0
        # least recently failing first, so eviction drops the stalest failure
        self.failures: OrderedDict[FailureKey, Failure] = OrderedDict()
        self._causes_of_call: dict[tuple[str, bytes], set[bytes]] = {}

    def on_call(self, call: CompletedCall) -> Failure | None:
        """The failure ``call`` extends or starts (None: it succeeded, or has no outcome)."""
        if call.interrupted or call.result_key is None:
            return None  # the harness stopped, or no outcome: neither failure nor success
        the_call = (call.name, call.args_digest)
        if not call.failed:
            # the agent succeeded at this very call: its failures are answered
            for cause in self._causes_of_call.pop(the_call, ()):
                del self.failures[(*the_call, cause)]
            return None
        self._order += 1
        key = (*the_call, failure_cause(call))
        failure = self.failures.get(key)
        if failure is not None:
            failure.again(call, self._order)
            self.failures.move_to_end(key)
            return failure
        if len(self.failures) >= self._max:
            self._forget_stalest()
        failure = self.failures[key] = Failure(call, self._order, self._cap)
        self._causes_of_call.setdefault(the_call, set()).add(key[2])
        return failure

    def _forget_stalest(self) -> None:
        (name, args, cause), _ = self.failures.popitem(last=False)
        causes = self._causes_of_call[(name, args)]
        causes.discard(cause)
        if not causes:
            del self._causes_of_call[(name, args)]


# --------------------------------------------------------------------------- the fold


@dataclass(slots=True)
class FoldStep:
    """What one call did to the fold: the run and stretches it closed, the failure it
    extended (or started)."""

    closed_run: Run | None = None
    closed_stretches: list[Stretch] = field(default_factory=list)
    failure: Failure | None = None


class ToolCallFold:
    """Runs, stretches and standing failures over a sequence of completed calls. Runs and
    stretches live within a turn (:meth:`close_turn`); failures outlive turns."""

    def __init__(self, max_width: int, max_failures: int, cap: int) -> None:
        self._cap = cap
        self.run: Run | None = None
        self.cycles = CycleTracker(max_width, cap)
        self.failures = FailureTracker(max_failures, cap)

    def on_call(self, call: CompletedCall) -> FoldStep:
        step = FoldStep()
        run = self.run
        if run is not None and run.identity == call.identity:
            run.length += 1
            run.evidence.add(call.call_seq)
        else:
            step.closed_run = run
            self.run = Run(call, self._cap)
        step.closed_stretches = self.cycles.on_call(call)
        step.failure = self.failures.on_call(call)
        return step

    def close_turn(self) -> FoldStep:
        """End the turn: the open run and stretches close (failures stand)."""
        step = FoldStep(self.run, self.cycles.close())
        self.run = None
        return step
