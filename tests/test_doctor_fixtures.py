"""Acceptance on real DSH 0.2.1 sessions, read through the session reader: the fixtures of
tests/fixtures/sessions and tests/fixtures/read_missing_three_turns (re-recorded by a test)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from tests.fixtures.record_read_missing_three_turns import FIXTURE_DIR, MISSING, record
from tests.paths import SESSIONS
from typer.testing import CliRunner

from looprescue.cli import app
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
    assert signal.session == "session-238d6be3-64d8-47d5-ba87-ae86f39dac3c"


def test_f_retry_storm_two_retries_in_turn_one() -> None:
    (signal,) = doctor(only_log("f_retry_storm"))
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == ("retry-storm", None, 1, 2)
    assert signal.evidence == (14, 15, 19, 20)  # the failed attempts and their retries


def doctor_cli_json(path: Path) -> tuple[int, list[dict]]:
    result = CliRunner().invoke(app, ["doctor", str(path), "--json"])
    return result.exit_code, [orjson.loads(line) for line in result.stdout.splitlines()]


def read_outcomes(log_path: Path) -> list[tuple[int | None, str, bool, int, int]]:
    """(turn, file_path, failed, call seq, result seq) of every read, from the log itself."""
    events = list(open_log(log_path).events())
    calls = {e["seq"]: e["data"] for e in events if e["type"] == "tool/call"}
    out = []
    for event in events:
        if event["type"] == "tool/result":
            (call_seq,) = event["sourceEventSeqs"]
            call = calls[call_seq]
            path = orjson.loads(call["arguments"])["file_path"]
            failed = event["data"]["message"]["isError"]
            out.append((call["turn"], path, failed, call_seq, event["seq"]))
    return out


def test_e_tool_error_two_turns_read_misused_in_turn_two() -> None:
    exit_code, lines = doctor_cli_json(SESSIONS / "e_tool_error_two_turns")
    assert exit_code == 1
    (line,) = lines
    found = (line["kind"], line["sub"], line["turn"], line["metric"])
    assert found == ("tool-misuse", "read", 2, 2)
    assert line["evidence"] == [35, 36]  # the failed reuse: its call and its result


def assert_misuse_in_turn_three_with_only_the_failed_reuses(fixture: Path) -> None:
    (log_path,) = find_session_logs([fixture])
    reads = read_outcomes(log_path)
    # what the fixture is: the missing file fails in three turns, other reads succeed between
    failures = [(turn, c, r) for turn, path, failed, c, r in reads if failed]
    successes = [(turn, path) for turn, path, failed, _, _ in reads if not failed]
    assert [turn for turn, _, _ in failures] == [1, 2, 3]
    assert {path for _, path, failed, _, _ in reads if failed} == {MISSING}
    assert successes == [(1, "README.md"), (2, "plan.txt")]

    exit_code, lines = doctor_cli_json(fixture)
    assert exit_code == 1
    (line,) = lines
    found = (line["kind"], line["sub"], line["turn"], line["metric"])
    assert found == ("tool-misuse", "read", 3, 3)
    reuses = [seq for _, call_seq, result_seq in failures[1:] for seq in (call_seq, result_seq)]
    assert line["evidence"] == reuses


def test_read_missing_three_turns_read_misused_in_turn_three() -> None:
    assert_misuse_in_turn_three_with_only_the_failed_reuses(FIXTURE_DIR)
    (log_path,) = find_session_logs([FIXTURE_DIR])
    assert [s.evidence for s in doctor(log_path)] == [(41, 42, 64, 65)]  # as its README says


@pytest.mark.slow
def test_read_missing_three_turns_recorded_afresh_gives_the_same_signal(dsh_runtime, tmp_path):
    fresh = record(tmp_path / "read_missing_three_turns", dsh_runtime)
    assert fresh.session_dir.parent != FIXTURE_DIR
    assert [run.returncode for run in fresh.runs] == [0, 0, 0]
    assert_misuse_in_turn_three_with_only_the_failed_reuses(fresh.session_dir.parent)


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
