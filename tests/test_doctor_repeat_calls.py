"""retry-storm `repeat:<tool>`, statement by statement (docs/doctor.md)."""

from __future__ import annotations

from tests.test_doctor_helpers import SessionBuilder

from looprescue.config import DoctorConfig
from looprescue.doctor import analyze_log
from looprescue.doctor.fold import ToolCallFold
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


def run(*calls: CompletedCall, config: DoctorConfig | None = None) -> list[tuple]:
    config = config or DoctorConfig()
    rule = RepeatedCallRule(config)
    fold = ToolCallFold(config.toolCycleMaxWidth, config.maxTrackedTools, config.maxEvidence)
    for c in calls:
        rule.on_step(fold.on_call(c))
    rule.on_step(fold.close_turn())
    return [(s.sub, s.metric, s.evidence) for s in rule.close_turn(1)]


def test_consecutive_calls_with_the_same_tool_arguments_and_result_are_a_run() -> None:
    seqs = (18, 26, 34, 45, 53, 64)
    assert run(*(call(seq) for seq in seqs)) == [("repeat:bash", 6, seqs)]


def test_key_order_of_arguments_does_not_split_a_run() -> None:
    orders = ['{"command":"ls","description":"d"}', '{"description":"d","command":"ls"}']
    assert run(*(call(i, args=orders[i % 2]) for i in range(3)))[0][1] == 3


def test_a_different_result_is_a_different_call() -> None:
    results = ["10%", "40%", "80%", "100%"]
    assert run(*(call(i * 4, "job_status", '{"id":"j1"}', r) for i, r in enumerate(results))) == []


def test_volatile_tokens_of_the_result_are_masked() -> None:
    stamps = ["2026-11-29T20:00:01Z", "2026-11-29T20:00:09Z", "2026-11-29T20:01:00Z"]
    calls = [call(i * 4, "read", result=f"same file, read at {s}") for i, s in enumerate(stamps)]
    assert run(*calls)[0][:2] == ("repeat:read", 3)


def test_any_other_call_in_between_breaks_the_run() -> None:
    calls = [call(1), call(5), call(9, args='{"command":"pwd"}'), call(13), call(17)]
    assert run(*calls) == []
    assert run(call(1), call(5), call(9, name="read"), call(13)) == []


def test_a_run_never_spans_two_turns() -> None:
    log = SessionBuilder()
    for _ in range(2):
        log.start_turn()
        for _ in range(2):
            log.next_step()
            log.tool("bash", {"command": "ls"}, "a.txt\n")
        log.end_turn()
    assert analyze_log(log.events, "s") == []


def test_repeat_tool_min_defaults_to_three() -> None:
    assert run(call(1), call(5)) == []
    assert run(call(1), call(5), config=DoctorConfig(repeatToolMin=2)) == [
        ("repeat:bash", 2, (1, 5))
    ]


def test_per_tool_and_turn_only_the_longest_run_is_reported() -> None:
    calls = [call(s, args='{"command":"ls"}') for s in (1, 2, 3)]
    calls += [call(s, args='{"command":"pwd"}') for s in (10, 11, 12, 13)]
    calls += [call(s, name="read", args='{"p":1}') for s in (20, 21, 22)]
    assert run(*calls) == [("repeat:bash", 4, (10, 11, 12, 13)), ("repeat:read", 3, (20, 21, 22))]


def test_evidence_is_the_tool_call_seqs_of_the_run() -> None:
    log = SessionBuilder()
    log.start_turn()
    for _ in range(3):
        log.next_step()
        log.tool("bash", {"command": "ls"}, "a.txt\n")
    log.end_turn()
    (signal,) = analyze_log(log.events, "s")
    assert [log.events[seq]["type"] for seq in signal.evidence] == ["tool/call"] * 3


def test_the_table_of_runs_is_bounded_by_max_tracked_tools() -> None:
    calls = [call(i * 3 + k, name=name) for i, name in enumerate("abc") for k in range(3)]
    assert [sub for sub, _, _ in run(*calls, config=DoctorConfig(maxTrackedTools=2))] == [
        "repeat:a",
        "repeat:b",
    ]
