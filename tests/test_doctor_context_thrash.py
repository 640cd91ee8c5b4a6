"""context-thrash: compaction, inject and delegation counts per session."""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.context_thrash import ContextThrashRule


def test_four_compactions_cross_the_default_threshold() -> None:
    rule = ContextThrashRule(DoctorConfig())
    for seq in (24, 29, 44, 49):
        rule.on_compaction_start(seq)
    (signal,) = rule.finish()
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == (
        "context-thrash",
        "compaction",
        None,
        4,
    )
    assert signal.evidence == (24, 29, 44, 49)


def test_below_thresholds_nothing() -> None:
    rule = ContextThrashRule(DoctorConfig())
    for seq in range(2):
        rule.on_compaction_start(seq)
    for seq in range(14):
        rule.on_injected_message(seq)
    for seq in range(19):
        rule.on_delegation_marker(seq)
    assert rule.finish() == []
    assert (rule.count("compaction"), rule.count("inject"), rule.count("delegation")) == (2, 14, 19)


def test_each_sub_at_its_own_threshold_in_fixed_order() -> None:
    rule = ContextThrashRule(
        DoctorConfig(compactionThreshold=1, injectThreshold=2, delegationThreshold=3, maxEvidence=2)
    )
    for seq in (1, 2, 3):
        rule.on_delegation_marker(seq)
    rule.on_injected_message(7)
    rule.on_injected_message(8)
    rule.on_compaction_start(9)
    signals = rule.finish()
    assert [(s.sub, s.metric, s.evidence) for s in signals] == [
        ("compaction", 1, (9,)),
        ("inject", 2, (7, 8)),
        ("delegation", 3, (1, 2)),
    ]
    assert "delegationThreshold 3" in signals[2].explanation
