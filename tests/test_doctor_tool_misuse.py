"""tool-misuse: failures of one tool recurring across turns, no success afterwards."""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.identity import CompletedCall
from looprescue.doctor.tool_misuse import ToolMisuseRule


def outcome(
    seq: int, turn: int, name: str = "read", *, failed: bool = True, interrupted: bool = False
) -> CompletedCall:
    return CompletedCall(
        call_seq=seq,
        turn=turn,
        name=name,
        args_digest=b"a",
        result_seq=seq + 1,
        result_key=b"r",
        failed=failed,
        interrupted=interrupted,
    )


def test_failure_in_two_turns_is_misuse_attributed_to_the_last() -> None:
    rule = ToolMisuseRule(DoctorConfig())
    rule.on_call(outcome(18, 1))
    rule.on_call(outcome(35, 2))
    (signal,) = rule.finish()
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == ("tool-misuse", "read", 2, 2)
    assert signal.evidence == (35, 36)  # only the failed reuse, not the first failure


def test_failures_within_one_turn_are_not_misuse() -> None:
    rule = ToolMisuseRule(DoctorConfig())
    for seq in (3, 7, 11):
        rule.on_call(outcome(seq, 1))
    assert rule.finish() == []


def test_a_later_success_cancels() -> None:
    rule = ToolMisuseRule(DoctorConfig())
    rule.on_call(outcome(1, 1))
    rule.on_call(outcome(5, 2))
    rule.on_call(outcome(9, 3, failed=False))
    assert rule.finish() == []


def test_success_of_another_tool_does_not_cancel() -> None:
    rule = ToolMisuseRule(DoctorConfig())
    rule.on_call(outcome(1, 1))
    rule.on_call(outcome(5, 2, name="bash", failed=False))
    rule.on_call(outcome(9, 3))
    rule.on_call(outcome(13, 3))
    (signal,) = rule.finish()
    assert (signal.turn, signal.metric, signal.evidence) == (3, 3, (9, 10, 13, 14))


def test_interrupted_results_are_neither_failure_nor_success() -> None:
    rule = ToolMisuseRule(DoctorConfig())
    rule.on_call(outcome(1, 1))
    rule.on_call(outcome(5, 2, interrupted=True))
    assert rule.finish() == []
    rule = ToolMisuseRule(DoctorConfig())
    rule.on_call(outcome(1, 1))
    rule.on_call(outcome(5, 2, interrupted=True))
    rule.on_call(outcome(9, 3))
    assert [s.turn for s in rule.finish()] == [3]


def test_threshold_counts_failures() -> None:
    rule = ToolMisuseRule(DoctorConfig(toolErrorMin=3))
    rule.on_call(outcome(1, 1))
    rule.on_call(outcome(5, 2))
    assert rule.finish() == []


def test_signals_sorted_by_turn_then_tool_and_table_bounded() -> None:
    rule = ToolMisuseRule(DoctorConfig(maxTrackedTools=2))
    rule.on_call(outcome(1, 1, name="zeta"))
    rule.on_call(outcome(2, 1, name="alpha"))
    rule.on_call(outcome(3, 2, name="zeta"))
    rule.on_call(outcome(4, 2, name="alpha"))
    assert [(s.sub, s.turn) for s in rule.finish()] == [("alpha", 2), ("zeta", 2)]
    rule.on_call(outcome(5, 3, name="third"))  # evicts the stalest, "zeta"
    rule.on_call(outcome(6, 4, name="third"))
    assert [s.sub for s in rule.finish()] == ["alpha", "third"]


def test_a_call_without_a_logged_outcome_neither_fails_nor_cancels() -> None:
    rule = ToolMisuseRule(DoctorConfig())
    rule.on_call(outcome(1, 1))
    rule.on_call(CompletedCall(call_seq=4, turn=2, name="read", args_digest=b"a"))
    rule.on_call(outcome(9, 3))
    assert [(s.turn, s.metric) for s in rule.finish()] == [(3, 2)]
