"""context-thrash: the session keeps rebuilding its context instead of working in it.

Session-level, three subs: `compaction` (compaction passes started), `inject` (user messages
no human wrote: runtime snapshots, reminders, notices, checkpoints, delegated prompts) and
`delegation` (subagent descriptors/catalog entries, hook invocations).
"""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.signals import CONTEXT_THRASH, DetourSignal, Evidence

COMPACTION = "compaction"
INJECT = "inject"
DELEGATION = "delegation"

# One event per piece of work handed to another agent or to a hook (a hook's other events,
# if any, would count it twice).
DELEGATION_EVENTS = frozenset({"subagent/descriptor", "subagent/catalog", "hook/invoked"})

_WHAT = {
    COMPACTION: ("compaction passes started", "compactionThreshold"),
    INJECT: ("injected (non-human) user messages", "injectThreshold"),
    DELEGATION: ("delegation markers (subagents, hooks)", "delegationThreshold"),
}


class ContextThrashRule:
    def __init__(self, config: DoctorConfig) -> None:
        self._thresholds = {
            COMPACTION: config.compactionThreshold,
            INJECT: config.injectThreshold,
            DELEGATION: config.delegationThreshold,
        }
        self._evidence = {sub: Evidence(config.maxEvidence) for sub in self._thresholds}

    def on_compaction_start(self, seq: int | None) -> None:
        self._evidence[COMPACTION].add(seq)

    def on_injected_message(self, seq: int | None) -> None:
        self._evidence[INJECT].add(seq)

    def on_delegation_marker(self, seq: int | None) -> None:
        self._evidence[DELEGATION].add(seq)

    def count(self, sub: str) -> int:
        return self._evidence[sub].total

    def finish(self) -> list[DetourSignal]:
        signals = []
        for sub, threshold in self._thresholds.items():
            evidence = self._evidence[sub]
            if evidence.total < threshold:
                continue
            what, key = _WHAT[sub]
            signals.append(
                DetourSignal(
                    kind=CONTEXT_THRASH,
                    sub=sub,
                    turn=None,
                    metric=evidence.total,
                    explanation=f"{evidence.total} {what} in this session ({key} {threshold})",
                    evidence=evidence.freeze(),
                )
            )
        return signals
