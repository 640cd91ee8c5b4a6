"""retry-storm repeat:<tool>: runs of identical consecutive calls."""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.identity import CompletedCall, canonical_arguments, digest, result_digest
from looprescue.doctor.repeat_calls import RepeatedCallRule


def call(
    seq: int, name: str = "bash", args: str = '{"command":"ls"}', result: str = "a\n"
) -> CompletedCall:
    return CompletedCall(
        call_seq=seq,
        turn=1,
        name=name,
        args_digest=digest(canonical_arguments(args)),
        result_seq=seq + 1,
        result_key=result_digest(False, None, result),
    )


def test_six_identical_calls_are_one_run() -> None:
    rule = RepeatedCallRule(DoctorConfig())
    for seq in (18, 26, 34, 45, 53, 64):
        rule.on_call(call(seq))
    (signal,) = rule.close_turn(1)
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == (
        "retry-storm",
        "repeat:bash",
        1,
        6,
    )
    assert signal.evidence == (18, 26, 34, 45, 53, 64)


def test_two_calls_are_below_threshold() -> None:
    rule = RepeatedCallRule(DoctorConfig())
    rule.on_call(call(1))
    rule.on_call(call(5))
    assert rule.close_turn(1) == []


def test_a_different_call_breaks_the_run() -> None:
    rule = RepeatedCallRule(DoctorConfig())
    for seq, args in [(1, '{"command":"ls"}'), (5, '{"command":"ls"}'), (9, '{"command":"pwd"}')]:
        rule.on_call(call(seq, args=args))
    rule.on_call(call(13))
    assert rule.close_turn(1) == []


def test_changing_results_are_polling_not_a_loop() -> None:
    rule = RepeatedCallRule(DoctorConfig())
    for seq, progress in enumerate(["10%", "40%", "80%", "100%"]):
        rule.on_call(call(seq * 4, name="job_status", args='{"id":"j1"}', result=progress))
    assert rule.close_turn(1) == []


def test_volatile_result_tokens_do_not_break_a_run() -> None:
    rule = RepeatedCallRule(DoctorConfig())
    for seq, stamp in enumerate(
        ["2026-11-29T20:00:01Z", "2026-11-29T20:00:09Z", "2026-11-29T20:01:00Z"]
    ):
        rule.on_call(call(seq * 4, name="read", result=f"same file, read at {stamp}"))
    (signal,) = rule.close_turn(1)
    assert signal.sub == "repeat:read" and signal.metric == 3


def test_longest_run_per_tool_is_reported_once_per_turn() -> None:
    rule = RepeatedCallRule(DoctorConfig())
    for seq in (1, 2, 3):
        rule.on_call(call(seq, args='{"command":"ls"}'))
    for seq in (10, 11, 12, 13):
        rule.on_call(call(seq, args='{"command":"pwd"}'))
    for seq in (20, 21, 22):
        rule.on_call(call(seq, name="read", args='{"p":1}'))
    signals = rule.close_turn(4)
    assert [(s.sub, s.metric, s.evidence) for s in signals] == [
        ("repeat:bash", 4, (10, 11, 12, 13)),
        ("repeat:read", 3, (20, 21, 22)),
    ]
    assert all(s.turn == 4 for s in signals)
    assert rule.close_turn(5) == []


def test_tracked_tool_table_is_bounded() -> None:
    rule = RepeatedCallRule(DoctorConfig(maxTrackedTools=2))
    seq = 0
    for name in ("a", "b", "c"):
        for _ in range(3):
            seq += 1
            rule.on_call(call(seq, name=name))
    assert [s.sub for s in rule.close_turn(1)] == ["repeat:a", "repeat:b"]
