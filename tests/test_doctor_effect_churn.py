"""effect-churn: a failed tool result and an llm/retry in the same turn."""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.effect_churn import EffectChurnRule
from looprescue.doctor.identity import CompletedCall


def outcome(seq: int, *, failed: bool, interrupted: bool = False) -> CompletedCall:
    return CompletedCall(
        seq, 1, "bash", b"a", seq + 1, b"r", failed=failed, interrupted=interrupted
    )


def test_failure_and_retry_in_one_turn() -> None:
    rule = EffectChurnRule(DoctorConfig())
    rule.on_retry(12)
    rule.on_call(outcome(3, failed=True))
    (signal,) = rule.close_turn(1)
    assert (signal.kind, signal.turn, signal.metric, signal.evidence) == (
        "effect-churn",
        1,
        2,
        (4, 12),
    )


def test_either_alone_is_not_churn() -> None:
    rule = EffectChurnRule(DoctorConfig())
    rule.on_retry(1)
    rule.on_call(outcome(3, failed=False))
    assert rule.close_turn(1) == []
    rule.on_call(outcome(5, failed=True))
    assert rule.close_turn(2) == []


def test_interrupted_results_and_turn_boundaries() -> None:
    rule = EffectChurnRule(DoctorConfig())
    rule.on_call(outcome(3, failed=True, interrupted=True))
    rule.on_retry(9)
    assert rule.close_turn(1) == []
    rule.on_call(outcome(13, failed=True))
    assert rule.close_turn(2) == []  # the retry belonged to turn 1
