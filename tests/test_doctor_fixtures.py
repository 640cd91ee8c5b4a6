"""Acceptance on the real DSH 0.2.1 fixtures, read through the session reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.paths import SESSIONS

from looprescue.doctor import DetourSignal, SessionAnalysis, analyze_log
from looprescue.dsh import find_session_logs, open_log


def doctor(path: Path) -> list[DetourSignal]:
    log = open_log(path)
    return analyze_log(log.events(), log.session_id, header=log.header)


def scenario_logs(name: str) -> list[Path]:
    return find_session_logs([SESSIONS / name])


def only_log(name: str) -> Path:
    (log,) = scenario_logs(name)
    return log


def test_fixture_logs_are_the_compressed_files_dsh_wrote() -> None:
    assert only_log("d_tool_loop").name == "session.v4.jsonl.zstd"


def test_d_tool_loop_six_identical_bash_calls() -> None:
    (signal,) = doctor(only_log("d_tool_loop"))
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == (
        "retry-storm",
        "repeat:bash",
        1,
        6,
    )
    assert signal.evidence == (18, 26, 34, 45, 53, 64)
    assert signal.session == "session-8a563efe-3cfa-4be8-b3b7-d1225978b73a"


def test_f_retry_storm_two_retries_in_turn_one() -> None:
    (signal,) = doctor(only_log("f_retry_storm"))
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == ("retry-storm", None, 1, 2)
    assert signal.evidence == (14, 15, 19, 20)  # the failed attempts and their retries


def test_e_tool_error_two_turns_read_misused_in_turn_two() -> None:
    (signal,) = doctor(only_log("e_tool_error_two_turns"))
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == ("tool-misuse", "read", 2, 2)
    assert signal.evidence == (35, 36)  # the failed reuse: its call and its result


def test_i2_compaction_counts_its_four_compactions() -> None:
    (signal,) = doctor(only_log("i2_compaction"))
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == (
        "context-thrash",
        "compaction",
        None,
        4,
    )
    assert signal.evidence == (24, 29, 44, 49)


@pytest.mark.parametrize(
    "scenario",
    [
        "g_healthy_long_answer",
        "k_python_sdk_run",
        "a_reasoning_loop",  # text loops are the scanner's business, not a detour
        "b_verbatim_cycle",
        "h_stream_cut",  # one retry only
        "h2_stream_interrupt_sigint",
        "j_openai_compat_provider",
        "i_subagent",  # parent and child session
    ],
)
def test_no_false_signals(scenario: str) -> None:
    logs = scenario_logs(scenario)
    assert logs
    for path in logs:
        assert doctor(path) == [], path


def test_i_subagent_child_is_found_and_seen_as_delegated() -> None:
    logs = scenario_logs("i_subagent")
    assert len(logs) == 2
    child = next(p for p in logs if open_log(p).header.get("origin") == "subagent")
    analysis = SessionAnalysis("child")
    for event in open_log(child).events():
        analysis.feed(event)
    # the delegated prompt and the runtime snapshot are both injected; one descriptor
    assert analysis.thrash.count("inject") == 2
    assert analysis.thrash.count("delegation") == 1
    assert analysis.finish() == []


def test_lower_thresholds_surface_the_weaker_detours_of_the_fixtures() -> None:
    """The same fixtures, judged stricter: the doctor sees what the README says is there."""
    strict = {"retryStormMin": 1, "injectThreshold": 2, "narrationMinRepeats": 2}
    log = open_log(only_log("h_stream_cut"))
    signals = analyze_log(log.events(), "h", strict)
    assert [(s.kind, s.turn, s.metric, s.evidence) for s in signals] == [
        ("retry-storm", 1, 1, (17, 18))
    ]
    log = open_log(only_log("d_tool_loop"))
    kinds = [(s.kind, s.sub, s.metric) for s in analyze_log(log.events(), "d", strict)]
    # two repeat-tool-reminders and the runtime snapshot were injected
    assert ("context-thrash", "inject", 3) in kinds
