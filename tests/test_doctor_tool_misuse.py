"""tool-misuse, statement by statement (docs/doctor.md, `tool-misuse`)."""

from __future__ import annotations

from tests.test_doctor_helpers import SessionBuilder

from looprescue.config import DoctorConfig
from looprescue.doctor import analyze_log
from looprescue.doctor.fold import FailureTracker
from looprescue.doctor.identity import CompletedCall, digest, result_digest
from looprescue.doctor.tool_misuse import ToolMisuseRule

MISSING = "FS_NOT_FOUND"


def outcome(
    seq: int,
    turn: int,
    path: str = "missing.txt",
    name: str = "read",
    *,
    code: str | None = MISSING,
    text: str | None = None,
    failed: bool = True,
    interrupted: bool = False,
) -> CompletedCall:
    """A finished call at ``seq`` with its result at ``seq + 1``."""
    code = code if failed else None
    return CompletedCall(
        call_seq=seq,
        turn=turn,
        name=name,
        args_digest=digest(path),
        result_seq=seq + 1,
        result_key=result_digest(failed, code, text if text is not None else f"{name} {path}"),
        failed=failed,
        interrupted=interrupted,
        error_code=code,
    )


def judge(*calls: CompletedCall, config: DoctorConfig | None = None) -> list[tuple]:
    config = config or DoctorConfig()
    failures = FailureTracker(config.maxTrackedTools, config.maxEvidence)
    rule = ToolMisuseRule(config, failures)
    for call in calls:
        failures.on_call(call)
    return [(s.sub, s.turn, s.metric, s.evidence) for s in rule.finish()]


# -- What: the same thing failing in a turn and again in a later turn -------------------------


def test_a_failure_that_recurs_in_a_later_turn_is_misuse() -> None:
    assert judge(outcome(18, 1), outcome(35, 2)) == [("read", 2, 2, (35, 36))]


def test_the_same_call_failing_for_another_cause_is_the_same_thing() -> None:
    assert judge(outcome(1, 1, code="FS_NOT_FOUND"), outcome(5, 2, code="FS_DENIED")) == [
        ("read", 2, 2, (5, 6))
    ]


def test_the_same_error_code_of_one_tool_is_the_same_thing_whatever_the_arguments() -> None:
    assert judge(outcome(1, 1, "a.txt"), outcome(5, 2, "b.txt")) == [("read", 2, 2, (5, 6))]


def test_without_a_code_the_same_masked_result_is_the_same_cause() -> None:
    failing = "make: *** [all] Error 2 after 1.2s\n[exit code: 2]"
    again = "make: *** [all] Error 2 after 3.4s\n[exit code: 2]"
    first = outcome(1, 1, "make", "bash", code=None, text=failing)
    assert judge(first, outcome(5, 2, "make -j4", "bash", code=None, text=again)) == [
        ("bash", 2, 2, (5, 6))
    ]
    other = "ls: cannot access 'x': No such file or directory\n[exit code: 2]"
    assert judge(first, outcome(5, 2, "ls x", "bash", code=None, text=other)) == []


def test_different_calls_failing_for_different_causes_are_not_the_same_thing() -> None:
    assert judge(outcome(1, 1, "a.txt", code=MISSING), outcome(5, 2, "b", code="FS_DENIED")) == []


def test_the_same_cause_of_two_different_tools_is_not_the_same_thing() -> None:
    assert judge(outcome(1, 1, name="read"), outcome(5, 2, name="edit")) == []


# -- Why: what answers a failure, and what never is evidence ----------------------------------


def test_a_failure_stands_until_the_agent_succeeds_at_that_same_call() -> None:
    assert judge(outcome(1, 1), outcome(5, 2), outcome(9, 3, failed=False)) == []
    # after the success the slate is clean: one later failure is no recurrence
    assert judge(outcome(1, 1), outcome(5, 2, failed=False), outcome(9, 3)) == []


def test_a_success_of_the_tool_with_other_arguments_does_not_answer_a_failure() -> None:
    calls = [
        outcome(1, 1),
        outcome(3, 1, "notes.txt", failed=False),
        outcome(5, 2),
        outcome(7, 2, "todo.txt", failed=False),
        outcome(9, 3),
    ]
    assert judge(*calls) == [("read", 3, 3, (5, 6, 9, 10))]


def test_a_success_of_another_tool_does_not_answer_a_failure() -> None:
    calls = [outcome(1, 1), outcome(5, 2, "missing.txt", "bash", failed=False), outcome(9, 3)]
    assert judge(*calls) == [("read", 3, 2, (9, 10))]


def test_answering_one_call_leaves_the_other_failures_of_its_group_standing() -> None:
    # a.txt and b.txt fail alike; a.txt is created and read; b.txt keeps failing
    calls = [outcome(1, 1, "a.txt"), outcome(5, 1, "b.txt"), outcome(9, 2, "a.txt", failed=False)]
    assert judge(*calls, outcome(13, 3, "b.txt")) == [("read", 3, 2, (13, 14))]


def test_a_success_is_never_evidence() -> None:
    calls = [outcome(1, 1), outcome(3, 2, "other.txt", failed=False), outcome(5, 2)]
    ((_, _, _, evidence),) = judge(*calls)
    assert 3 not in evidence and 4 not in evidence


def test_crash_repair_results_count_neither_way() -> None:
    # not a failure: two turns with one real failure each would need it to count
    assert judge(outcome(1, 1), outcome(5, 2, code="TOOL_OUTCOME_UNKNOWN", interrupted=True)) == []
    # not a success: it does not answer the failure before it
    calls = [outcome(1, 1), outcome(5, 2, interrupted=True, code="TOOL_NOT_STARTED"), outcome(9, 3)]
    assert judge(*calls) == [("read", 3, 2, (9, 10))]


def test_a_call_without_a_logged_outcome_counts_neither_way() -> None:
    silent = CompletedCall(call_seq=4, turn=2, name="read", args_digest=digest("missing.txt"))
    assert judge(outcome(1, 1), silent, outcome(9, 3)) == [("read", 3, 2, (9, 10))]


# -- Threshold, metric and attribution -------------------------------------------------------


def test_failures_within_one_turn_are_not_misuse() -> None:
    assert judge(outcome(3, 1), outcome(7, 1), outcome(11, 1)) == []


def test_tool_error_min_counts_the_failures_of_one_group() -> None:
    strict = DoctorConfig(toolErrorMin=3)
    assert judge(outcome(1, 1), outcome(5, 2), config=strict) == []
    assert judge(outcome(1, 1), outcome(5, 2), outcome(9, 2), config=strict) == [
        ("read", 2, 3, (5, 6, 9, 10))
    ]


def test_the_metric_sums_the_misused_groups_of_the_tool() -> None:
    calls = [
        outcome(1, 1, "a.txt", code=MISSING),
        outcome(5, 1, "src", code="FS_NOT_REGULAR_FILE"),
        outcome(9, 2, "b.txt", code=MISSING),
        outcome(13, 3, "src", code="FS_NOT_REGULAR_FILE"),
        outcome(17, 3, "z", code="FS_DENIED"),  # alone: not misused, not counted
    ]
    assert judge(*calls) == [("read", 3, 4, (9, 10, 13, 14))]


def test_one_signal_per_tool_attributed_to_the_last_turn_it_failed_in() -> None:
    calls = [
        outcome(1, 1, name="zeta"),
        outcome(3, 1, name="alpha"),
        outcome(5, 2, name="alpha"),
        outcome(7, 4, name="zeta"),
        outcome(9, 4, name="zeta"),
    ]
    assert judge(*calls) == [("alpha", 2, 2, (5, 6)), ("zeta", 4, 3, (7, 8, 9, 10))]


# -- Evidence ----------------------------------------------------------------------------------


def test_evidence_is_each_failing_call_after_the_first_of_its_group_with_its_result() -> None:
    # a reuse in the first turn is a failed reuse too; only the very first failure is left out
    calls = [outcome(1, 1), outcome(5, 1), outcome(9, 2, "other.txt")]
    assert judge(*calls) == [("read", 2, 3, (5, 6, 9, 10))]


def test_evidence_is_capped_while_the_metric_keeps_counting() -> None:
    calls = [outcome(seq, 1 + seq // 40) for seq in range(0, 400, 4)]
    ((_, turn, metric, evidence),) = judge(*calls, config=DoctorConfig(maxEvidence=6))
    assert (turn, metric, evidence) == (10, 100, (4, 5, 8, 9, 12, 13))


def test_the_table_of_standing_failures_is_bounded_stalest_first() -> None:
    config = DoctorConfig(maxTrackedTools=2)
    failures = FailureTracker(config.maxTrackedTools, config.maxEvidence)
    rule = ToolMisuseRule(config, failures)
    failures.on_call(outcome(1, 1, "a", code="A"))
    failures.on_call(outcome(3, 1, "b", code="B"))
    failures.on_call(outcome(5, 2, "c", code="C"))  # evicts a
    assert rule.tracked == 2
    failures.on_call(outcome(7, 3, "a", code="A"))  # a's first failure was forgotten
    failures.on_call(outcome(9, 4, "c", code="C"))
    assert [(s.turn, s.evidence) for s in rule.finish()] == [(4, (9, 10))]


# -- Through the fold, from DSH-shaped events --------------------------------------------------


def read_missing_with_other_reads_between(turns: int) -> SessionBuilder:
    log = SessionBuilder()
    for turn in range(1, turns + 1):
        log.start_turn()
        log.user("Read the notes again.")
        log.next_step()
        log.tool(
            "read",
            {"file_path": "does-not-exist/notes.txt"},
            'Error: cannot read "/home/ana/proj/does-not-exist/notes.txt": not found',
            error_code=MISSING,
        )
        log.next_step()
        log.tool("read", {"file_path": f"file{turn}.txt"}, f"1: line of file {turn}")
        log.next_step()
        log.assistant("The notes file is missing.")
        log.end_turn()
    return log


def test_reads_of_existing_files_between_the_failures_do_not_hide_the_misuse() -> None:
    log = read_missing_with_other_reads_between(3)
    (signal,) = analyze_log(log.events, "s")
    failed = [
        (e["sourceEventSeqs"][0], e["seq"])
        for e in log.events
        if e["type"] == "tool/result" and e["data"]["message"]["isError"]
    ]
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == ("tool-misuse", "read", 3, 3)
    assert signal.evidence == failed[1] + failed[2]
    assert "read failed 3 times from turn 1 to turn 3 (FS_NOT_FOUND)" in signal.explanation
