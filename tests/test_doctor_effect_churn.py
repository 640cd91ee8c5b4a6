"""effect-churn, statement by statement (docs/doctor.md, `effect-churn`)."""

from __future__ import annotations

from tests.test_doctor_helpers import SessionBuilder

from looprescue.doctor import analyze_log

QUIET = {"retryStormMin": 100}  # keep retry-storm out of the way


def churn(log: SessionBuilder) -> list[tuple]:
    return [
        (s.turn, s.metric, s.evidence)
        for s in analyze_log(log.events, "s", QUIET)
        if s.kind == "effect-churn"
    ]


def test_a_failed_tool_call_and_a_retried_model_request_in_one_turn_are_churn() -> None:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    _, retry = log.retry()
    _, result = log.tool("read", {"file_path": "x"}, "Error: not found", error_code="FS_NOT_FOUND")
    log.end_turn()
    assert churn(log) == [(1, 2, (retry, result))]


def test_both_must_happen_in_the_same_turn_either_alone_is_not_churn() -> None:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    log.retry()
    log.tool("read", {"file_path": "a.txt"}, "1: a")  # a success
    log.end_turn()
    log.start_turn()
    log.next_step()
    log.tool("read", {"file_path": "x"}, "Error: not found", error_code="FS_NOT_FOUND")
    log.end_turn()
    assert churn(log) == []


def test_metric_is_failed_results_plus_retries_and_evidence_their_seqs_in_log_order() -> None:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    seqs = [log.tool("bash", {"command": "make"}, "boom", is_error=True)[1]]
    seqs += [log.retry()[1] for _ in range(3)]
    seqs.append(log.tool("bash", {"command": "make"}, "boom", is_error=True)[1])
    log.end_turn()
    (found,) = churn(log)
    assert found == (1, 5, tuple(sorted(seqs)))
    types = sorted(log.events[seq]["type"] for seq in found[2])
    assert types == ["llm/retry"] * 3 + ["tool/result"] * 2


def test_a_job_that_exited_non_zero_is_a_failed_tool_call() -> None:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    log.retry()
    call_seq, result_seq = log.tool("bash", {"command": "make"}, "(no output)\n[exit code: 2]")
    call_id = log.events[call_seq]["data"]["callId"]
    settled = {"toolCall": {"callId": call_id}, "status": "completed", "detail": "exit code: 2"}
    log.events.insert(result_seq, {"type": "job/settled", "seq": -1, "time": 0, "data": settled})
    log.end_turn()
    assert [metric for _, metric, _ in churn(log)] == [2]


def test_crash_repair_results_are_not_failed_tool_calls() -> None:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    log.retry()
    log.tool("bash", {"command": "make"}, "interrupted", error_code="TOOL_OUTCOME_UNKNOWN")
    log.end_turn()
    assert churn(log) == []
