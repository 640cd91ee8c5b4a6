"""Is the agent looping on its tools? The doctor's fold over one request's history.

:func:`find_loop` feeds the history's calls (``history.py``) to the doctor's tool-call fold
(``doctor/fold.py``), the same one `doctor` runs on a session log, and reads it at the end of
the history: the run of identical calls the last call belongs to, the cyclic stretches it
ends, the standing failure it repeats. Everything derives from the history the request
carries, so the verdict is the same in any worker or instance, and a note the guard added to
an earlier request (never part of the client's history) counts for nothing.

:func:`rung_for` places a loop on the ladder: ``steer`` (a note goes upstream with the
request), then ``stop`` (the guard answers, the upstream is not called), or ``watch`` (only
recorded: ``observe`` mode, or both rungs off).
"""

from __future__ import annotations

import fnmatch
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..config import ToolGuardConfig
from ..doctor.fold import Failure, Run, Stretch, ToolCallFold
from ..doctor.identity import (
    CompletedCall,
    arguments_key,
    canonical_arguments,
    canonical_key,
    result_digest,
    tool_name,
)
from .history import ToolStep, _HumanTurn

LoopKind = Literal["repeat", "cycle", "failure"]
Rung = Literal["steer", "stop", "watch"]

# Only the latest calls are folded: a loop shows at the end of the history, and a request
# with thousands of calls in its history costs no more to judge than one with this many.
RECENT_CALLS = 256
_SHOWN_ARGUMENT_CHARS = 120


@dataclass(frozen=True, slots=True)
class ToolLoop:
    """A loop at the end of a request's history."""

    kind: LoopKind
    calls: tuple[str, ...]  # the repeated call, or the cycle's calls, as shown to people
    tools: tuple[str, ...]
    count: int  # calls in the run / whole repeats of the cycle / failures of the call
    excess: int  # loop calls past the threshold (0: the threshold was just reached)
    span: int  # calls of the history that belong to the loop
    # where the loop's calls are: their results' message indexes, in order (for its cost)
    messages: tuple[int, ...] = ()

    def audit(self) -> dict[str, object]:
        return {
            "loop": self.kind,
            "tools": list(self.tools),
            "calls": list(self.calls),
            "count": self.count,
            "excess": self.excess,
            "loop_calls": self.span,
        }


def shown_call(step: ToolStep) -> str:
    """``bash {"command":"ls"}``: the tool and its arguments, on one line, shortened."""
    arguments = canonical_arguments(step.arguments).replace("\n", " ")
    if len(arguments) > _SHOWN_ARGUMENT_CHARS:
        arguments = arguments[: _SHOWN_ARGUMENT_CHARS - 1] + "…"
    return f"{tool_name(step.name)} {arguments}"


class DigestCache:
    """Digests of arguments and results already normalised, by their text: a conversation's
    next request carries the same calls again, and normalising a text costs far more than
    hashing it. Keyed by content, not by call id (some servers give every call the same id).
    Bounded (least recently used dropped first) and safe to share between threads."""

    def __init__(self, size: int = 16384) -> None:
        self._size = size
        self._digests: OrderedDict[tuple[object, ...], bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[object, ...], make: Callable[[], bytes]) -> bytes:
        with self._lock:
            found = self._digests.get(key)
            if found is not None:
                self._digests.move_to_end(key)
                return found
        found = make()
        with self._lock:
            self._digests[key] = found
            while len(self._digests) > self._size:
                self._digests.popitem(last=False)
        return found

    def digests(self, step: ToolStep) -> tuple[bytes, bytes]:
        """(arguments digest, result digest) of a call."""
        canonical = canonical_arguments(step.arguments)
        args = self.get(
            ("arguments", len(canonical), hash(canonical)), lambda: canonical_key(canonical)
        )
        text = step.result
        result = self.get(
            ("result", step.failed, len(text), hash(text)),
            lambda: result_digest(step.failed, None, text),
        )
        return args, result


def _digests(step: ToolStep) -> tuple[bytes, bytes]:
    return arguments_key(step.arguments), result_digest(step.failed, None, step.result)


def _completed(position: int, step: ToolStep, cache: DigestCache | None) -> CompletedCall:
    args, result = cache.digests(step) if cache is not None else _digests(step)
    return CompletedCall(
        call_seq=position,
        turn=None,
        name=tool_name(step.name),
        args_digest=args,
        result_seq=position,
        result_key=result,
        failed=step.failed,
    )


class _Exempt:
    def __init__(self, globs: Sequence[str]) -> None:
        self._globs = tuple(globs)

    def all(self, names: Sequence[str]) -> bool:
        """True when every tool of a loop is exempt."""
        return bool(self._globs) and all(
            any(fnmatch.fnmatchcase(name, glob) for glob in self._globs) for name in names
        )


def find_loop(
    history: Sequence[object], config: ToolGuardConfig, cache: DigestCache | None = None
) -> ToolLoop | None:
    """The loop the history ends in, if any (the strongest: furthest past its threshold)."""
    if not history or not isinstance(history[-1], ToolStep):
        return None  # no call yet, or a person spoke last: a new turn is no loop
    start = len(history)
    seen = 0
    while start > 0 and seen < RECENT_CALLS:
        start -= 1
        seen += isinstance(history[start], ToolStep)
    fold = ToolCallFold(config.cycleMaxWidth, RECENT_CALLS, RECENT_CALLS)
    steps: dict[int, ToolStep] = {}
    last_failure: Failure | None = None
    for position in range(start, len(history)):
        item = history[position]
        if isinstance(item, _HumanTurn):
            fold.close_turn()  # runs and cycles live within a turn; failures stand
            continue
        assert isinstance(item, ToolStep)
        steps[position] = item
        last_failure = fold.on_call(_completed(position, item, cache)).failure
    exempt = _Exempt(config.exempt)
    found = [
        loop
        for loop in (
            _repeat(fold.run, steps, config),
            *(_cycle(s, steps, config) for s in fold.cycles.live.values()),
            _failure(last_failure, steps, config),
        )
        if loop is not None and not exempt.all(loop.tools)
    ]
    return max(found, key=lambda loop: (loop.excess, loop.span), default=None)


def _messages(positions: Sequence[int], steps: dict[int, ToolStep]) -> tuple[int, ...]:
    return tuple(steps[p].message for p in sorted(set(positions)) if p in steps)


def _repeat(
    run: Run | None, steps: dict[int, ToolStep], config: ToolGuardConfig
) -> ToolLoop | None:
    if run is None or run.length < config.repeatCalls:
        return None
    step = steps[run.first.call_seq or 0]
    return ToolLoop(
        "repeat",
        (shown_call(step),),
        (run.name,),
        run.length,
        run.length - config.repeatCalls,
        run.length,
        _messages(run.evidence.seqs, steps),
    )


def _cycle(
    stretch: Stretch, steps: dict[int, ToolStep], config: ToolGuardConfig
) -> ToolLoop | None:
    needed = stretch.width * config.cycleRepeats
    if stretch.length < needed or not stretch.primitive:
        return None
    return ToolLoop(
        "cycle",
        tuple(shown_call(steps[call.call_seq or 0]) for call in stretch.calls),
        stretch.names,
        stretch.repeats,
        stretch.length - needed,
        stretch.length,
        _messages(stretch.evidence.seqs, steps),
    )


def _failure(
    failure: Failure | None, steps: dict[int, ToolStep], config: ToolGuardConfig
) -> ToolLoop | None:
    if failure is None or failure.count < config.failedCalls:
        return None
    last = steps[max(steps)]
    return ToolLoop(
        "failure",
        (shown_call(last),),
        (tool_name(last.name),),
        failure.count,
        failure.count - config.failedCalls,
        failure.count,
        _messages([*failure.first_seqs, *failure.later.seqs], steps),
    )


def rung_for(loop: ToolLoop, config: ToolGuardConfig, acting: bool) -> Rung:
    """Where a loop stands on the ladder. ``acting``: False in ``observe`` mode."""
    if not acting or not (config.steer or config.stop):
        return "watch"
    steered = config.steerRequests if config.steer else 0
    if config.stop and loop.excess >= steered:
        return "stop"
    return "steer"
