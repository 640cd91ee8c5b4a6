"""SessionAnalysis: event routing, turn boundaries, pending calls, emission rules."""

from __future__ import annotations

import pytest
from tests.test_doctor_helpers import SessionBuilder, a_busy_session

from looprescue.config import ConfigError, DoctorConfig, LoopRescueConfig
from looprescue.doctor import SessionAnalysis, analyze_log, doctor_config


def kinds(signals) -> list[tuple]:
    return [(s.kind, s.sub, s.turn, s.metric) for s in signals]


def test_per_turn_signals_are_emitted_when_their_turn_ends() -> None:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    log.retry()
    log.retry()
    log.assistant("answer")
    log.end_turn()
    log.start_turn()
    log.end_turn()
    analysis = SessionAnalysis("s")
    out_per_event = [analysis.feed(e) for e in log.events]
    turn_end_1 = next(i for i, e in enumerate(log.events) if e["type"] == "turn/end")
    assert kinds(out_per_event[turn_end_1]) == [("retry-storm", None, 1, 2)]
    assert all(not out for i, out in enumerate(out_per_event) if i != turn_end_1)
    assert analysis.finish() == []
    assert analysis.finish() == []  # idempotent


def test_session_id_is_stamped_on_every_signal() -> None:
    signals = analyze_log(a_busy_session().events, "session-x", DoctorConfig(retryStormMin=1))
    assert signals and {s.session for s in signals} == {"session-x"}


def test_busy_session() -> None:
    signals = analyze_log(a_busy_session().events, "s", DoctorConfig(retryStormMin=1))
    assert kinds(signals) == [
        ("retry-storm", None, 1, 1),
        ("effect-churn", None, 1, 2),
        ("tool-misuse", "read", 2, 2),
    ]


def test_a_turn_left_open_ends_at_the_end_of_the_log() -> None:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    for _ in range(3):
        log.tool("bash", {"command": "ls"}, "a\n")
    analysis = SessionAnalysis("s")
    assert [s for e in log.events for s in analysis.feed(e)] == []
    assert kinds(analysis.finish()) == [("retry-storm", "repeat:bash", 1, 3)]
    with pytest.raises(RuntimeError):
        analysis.feed(log.events[0])


def test_a_turn_left_open_ends_at_the_next_turn_start() -> None:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    log.retry()
    log.retry()
    log.start_turn()  # crash: no turn/end (DSH would have added closers)
    analysis = SessionAnalysis("s")
    out = [s for e in log.events for s in analysis.feed(e)]
    assert kinds(out) == [("retry-storm", None, 1, 2)]


def test_result_matched_by_source_seq_when_the_call_id_is_missing() -> None:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    for _ in range(3):
        log.tool("bash", {"command": "ls"}, "a\n")
    for event in log.events:
        if event["type"] == "tool/result":
            del event["data"]["message"]["toolCallId"]
            del event["data"]["message"]["source"]["callId"]
    log.end_turn()
    (signal,) = analyze_log(log.events, "s")
    assert signal.sub == "repeat:bash" and signal.metric == 3


def test_parallel_calls_are_judged_in_call_order() -> None:
    """Two calls then their results in reverse order: identities still follow call order."""
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    for _ in range(3):
        log.assistant("", [("c-a", "read", '{"p":"a"}'), ("c-b", "bash", '{"c":"ls"}')])
        a = log.add(
            "tool/call",
            {"turn": 1, "step": 1, "callId": "c-a", "name": "read", "arguments": '{"p":"a"}'},
        )
        b = log.add(
            "tool/call",
            {"turn": 1, "step": 1, "callId": "c-b", "name": "bash", "arguments": '{"c":"ls"}'},
        )
        for call_id, seq in (("c-b", b), ("c-a", a)):
            message = {
                "role": "tool",
                "toolCallId": call_id,
                "content": [{"type": "text", "text": "x"}],
                "isError": False,
            }
            log.add(
                "tool/result", {"turn": 1, "step": 1, "message": message}, sourceEventSeqs=[seq]
            )
        # reuse of call ids across steps is what DSH never does; make them unique again
        for event in log.events[-4:]:
            data = event["data"]
            if "callId" in data:
                data["callId"] += f"-{event['seq']}"
        for event in log.events[-2:]:
            event["data"]["message"]["toolCallId"] += f"-{event['sourceEventSeqs'][0]}"
    log.end_turn()
    signals = analyze_log(log.events, "s")
    assert kinds(signals) == [("tool-cycle", "cycle:read>bash", 1, 3)]


def failing_in_two_turns(mark_failed) -> list[dict]:
    """The same bash call in two turns; ``mark_failed(log, call_seq, result_seq)`` makes the
    otherwise successful result a failure the way the statement under test says."""
    log = SessionBuilder()
    for _ in range(2):
        log.start_turn()
        log.next_step()
        call_seq, result_seq = log.tool("bash", {"command": "make"}, "boom")
        mark_failed(log, call_seq, result_seq)
        log.end_turn()
    return log.events


def settle_job(log: SessionBuilder, call_seq: int, result_seq: int, **fields) -> None:
    call_id = log.events[call_seq]["data"]["callId"]
    settled = {"jobId": "bash-1", "toolCall": {"callId": call_id}, **fields}
    log.events.insert(result_seq, {"type": "job/settled", "seq": -1, "time": 0, "data": settled})


def misuse(events: list[dict]) -> list[tuple]:
    return [(s.sub, s.turn) for s in analyze_log(events, "s") if s.kind == "tool-misuse"]


def test_a_call_fails_when_its_result_has_is_error() -> None:
    def is_error(log, _call, result):
        log.events[result]["data"]["message"]["isError"] = True

    assert misuse(failing_in_two_turns(is_error)) == [("bash", 2)]
    assert misuse(failing_in_two_turns(lambda *_: None)) == []  # the control


def test_a_call_fails_when_its_result_has_an_error_code() -> None:
    def coded(log, _call, result):
        log.events[result]["data"]["error"] = {"name": "FsError", "code": "FS_NOT_FOUND"}

    assert misuse(failing_in_two_turns(coded)) == [("bash", 2)]


def test_a_job_that_exited_non_zero_fails_although_is_error_is_false() -> None:
    def exited(log, call, result):
        settle_job(log, call, result, status="completed", detail="exit code: 2")

    assert misuse(failing_in_two_turns(exited)) == [("bash", 2)]

    def exited_zero(log, call, result):
        settle_job(log, call, result, status="completed", detail="exit code: 0")

    assert misuse(failing_in_two_turns(exited_zero)) == []


def test_a_job_that_settled_as_failed_fails() -> None:
    def failed(log, call, result):
        settle_job(log, call, result, status="failed", detail="spawn error")

    assert misuse(failing_in_two_turns(failed)) == [("bash", 2)]


def test_crash_repair_results_count_as_neither_failure_nor_success() -> None:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    log.tool("read", {"file_path": "x"}, "Error: not found", error_code="FS_NOT_FOUND")
    log.end_turn("interrupted")
    log.start_turn()
    log.next_step()
    # DSH's closer for a call the crash left without a result (FORMAT.md §9)
    log.tool(
        "read",
        {"file_path": "x"},
        "The tool call was interrupted.",
        error_code="TOOL_OUTCOME_UNKNOWN",
    )
    log.retry()
    log.end_turn()
    assert analyze_log(log.events, "s", {"retryStormMin": 5}) == []  # no misuse, no churn
    log.start_turn()
    log.next_step()
    log.tool("read", {"file_path": "x"}, "Error: not found", error_code="FS_NOT_FOUND")
    log.end_turn()
    assert misuse(log.events) == [("read", 3)]  # and it answered nothing


def test_every_signal_has_kind_sub_turn_metric_a_one_line_explanation_and_evidence() -> None:
    log = a_busy_session()
    for event in log.events:
        if event["type"] == "tool/call" and event["data"]["name"] == "read":
            event["data"]["name"] = "read\nfile"  # an odd name must not break the line
    signals = analyze_log(log.events, "s", DoctorConfig(retryStormMin=1))
    assert {s.kind for s in signals} == {"retry-storm", "effect-churn", "tool-misuse"}
    for signal in signals:
        record = signal.to_dict()
        assert list(record) == [
            "session", "kind", "sub", "turn", "metric", "explanation", "evidence",
        ]  # fmt: skip
        assert record["explanation"] and "\n" not in record["explanation"]
        assert all(isinstance(seq, int) for seq in record["evidence"])
    assert [s.sub for s in signals if s.kind == "tool-misuse"] == ["read\\nfile"]


def test_tool_misuse_and_context_thrash_are_emitted_at_the_end_of_the_log() -> None:
    log = a_busy_session()
    for _ in range(2):
        log.start_turn()
        log.compaction()
        log.end_turn()
    analysis = SessionAnalysis("s")
    during = [s.kind for e in log.events for s in analysis.feed(e)]
    assert "tool-misuse" not in during and "context-thrash" not in during
    assert [s.kind for s in analysis.finish()] == ["tool-misuse", "context-thrash"]


def test_malformed_events_are_ignored_not_fatal() -> None:
    junk = [
        "not a dict",
        {"no": "type"},
        {"type": 5},
        {"type": "tool/call", "data": "str"},
        {"type": "tool/result", "data": {"message": 3}},
        {"type": "assistant/message", "data": {"message": {"content": "plain"}}},
        {"type": "turn/start", "data": {"turn": "one"}},
        {"type": "llm/retry"},
        {"type": "turn/end", "data": None},
    ]
    assert analyze_log(junk, "s") == []


def test_each_kind_turn_and_sub_is_reported_at_most_once() -> None:
    log = SessionBuilder()
    for _ in range(2):
        log.start_turn()
        log.next_step()
        log.retry()
        log.retry()
        log.end_turn()
        log.turn = 0  # a log that restarts its turn numbering
    signals = analyze_log(log.events, "s")
    assert kinds(signals) == [("retry-storm", None, 1, 2)]


def test_thresholds_are_validated_and_a_bad_one_fails_naming_the_key() -> None:
    assert doctor_config(None) == DoctorConfig()
    assert doctor_config(LoopRescueConfig(doctor=DoctorConfig(retryStormMin=9))).retryStormMin == 9
    assert doctor_config({"retryStormMin": 4}).retryStormMin == 4
    with pytest.raises(ConfigError, match=r"doctor\.retryStormMin"):
        doctor_config({"retryStormMin": 0})
    with pytest.raises(ConfigError, match=r"doctor\.retryStormMax: unknown key"):
        doctor_config({"retryStormMax": 3})
    with pytest.raises(ConfigError, match=r"doctor\.toolCycleMaxWidth"):
        SessionAnalysis("s", {"toolCycleMaxWidth": 1})


def test_every_table_holds_at_most_max_tracked_tools_entries() -> None:
    """Thousands of distinct tools, unanswered calls and failures: every table stays capped."""
    config = DoctorConfig(maxTrackedTools=8, maxEvidence=4, repeatToolMin=2, toolCycleMinRepeats=2)
    analysis = SessionAnalysis("s", config)
    seq = 0

    def feed(event_type: str, data: dict, **envelope) -> None:
        nonlocal seq
        analysis.feed({"type": event_type, "seq": seq, "data": data, **envelope})
        seq += 1

    feed("turn/start", {"turn": 1})
    peak: dict[str, int] = {}
    for i in range(3000):
        name = f"tool{i}"
        for k in range(2):  # two identical failing calls per tool: a repeat run each
            feed("tool/call", {"callId": f"c{i}-{k}", "name": name, "arguments": "{}"})
            message = {"toolCallId": f"c{i}-{k}", "content": [], "isError": True}
            feed("tool/result", {"message": message})
        feed("tool/call", {"callId": f"never-answered-{i}", "name": name, "arguments": "{}"})
        for table, size in analysis.table_sizes().items():
            peak[table] = max(peak.get(table, 0), size)
    assert max(peak.values()) == 8  # full, never beyond
    assert peak["repeatRuns"] == peak["failingCalls"] == 8
    feed("turn/end", {"turn": 1})
    feed("turn/start", {"turn": 2})
    feed("tool/call", {"callId": "last", "name": "tool2999", "arguments": "{}"})
    feed("tool/result", {"message": {"toolCallId": "last", "isError": True}})
    signals = analysis.finish()
    assert [s.kind for s in signals].count("tool-misuse") == 1
    assert all(len(s.evidence) <= 4 for s in signals)


def test_legacy_version_0_logs_are_understood() -> None:
    """rc.8 logs (FORMAT.md §13): nested tool-result blocks, pre-identity results and messages."""
    events: list[dict] = []

    def add(event_type: str, data: dict) -> None:
        events.append({"type": event_type, "seq": len(events), "time": 0, "data": data})

    for turn in (1, 2):
        add("turn/start", {"turn": turn})
        add(
            "tool/call",
            {"turn": turn, "step": 1, "callId": f"a{turn}", "name": "read", "arguments": "{}"},
        )
        block = {
            "type": "tool-result",
            "toolCallId": f"a{turn}",
            "content": [{"type": "text", "text": "no"}],
            "isError": True,
        }
        add(
            "tool/result",
            {"message": {"source": {"kind": "tool"}, "content": [block], "role": "user"}},
        )
        add(
            "tool/call",
            {"turn": turn, "step": 2, "callId": f"b{turn}", "name": "grep", "arguments": "{}"},
        )
        add(
            "tool/result",
            {"turn": turn, "step": 2, "callId": f"b{turn}", "content": [], "isError": True},
        )
        for step in (3, 4, 5):
            add(
                "assistant/message",
                {
                    "turn": turn,
                    "step": step,
                    "content": [
                        {"type": "text", "text": "Working on it, checking the files again now."}
                    ],
                },
            )
        add(
            "user/message",
            {
                "content": [{"type": "text", "text": "note"}],
                "source": {"kind": "plugin", "plugin": "x"},
            },
        )
        add("turn/end", {"turn": turn})
    signals = analyze_log(events, "legacy", {"injectThreshold": 2})
    assert kinds(signals) == [
        ("narration-loop", None, 1, 3),
        ("narration-loop", None, 2, 3),
        ("tool-misuse", "grep", 2, 2),
        ("tool-misuse", "read", 2, 2),
        ("context-thrash", "inject", None, 2),
    ]
