"""The real DSH runtime against the scripted upstream: the end-to-end harness works."""

from __future__ import annotations

import pytest
import zstandard
from tests.paths import SESSIONS
from tests.support.dsh_runtime import (
    DUMMY_API_KEY,
    install_session_copy,
    project_key,
    run_dsh_headless,
    run_dsh_headless_openai,
)
from tests.support.scripted_upstream import ScriptedResponse, ToolCall

pytestmark = pytest.mark.slow


def read_log(path) -> str:
    with path.open("rb") as handle:
        reader = zstandard.ZstdDecompressor().stream_reader(handle, read_across_frames=True)
        return reader.read().decode("utf-8")


def test_headless_turn_over_the_native_route(dsh_runtime, scripted_upstream, tmp_path):
    answer = "The loader applies bundle, profile and overlay patches in order."
    scripted_upstream.enqueue(ScriptedResponse(reasoning="Recall the layer order.", text=answer))
    home, project = tmp_path / ".dsh", tmp_path / "proj"

    run = run_dsh_headless(
        home, project, "How are layers composed?", scripted_upstream.base_url, runtime=dsh_runtime
    )

    assert run.returncode == 0, run.describe()
    assert run.final_text == answer
    assert [e["text"] for e in run.events_of("text")] == [answer]
    agent = scripted_upstream.agent_requests()
    assert [(r.method, r.path, r.outcome) for r in agent] == [("POST", "/v1/messages", "completed")]
    assert agent[0].headers["x-api-key"] == DUMMY_API_KEY
    assert agent[0].headers["x-deepseek-harness-session-id"] == run.session_id
    assert "How are layers composed?" in agent[0].text(include_dsh_extensions=False)
    assert {r.purpose for r in scripted_upstream.requests} <= {"agent", "title"}
    log = run.session_dir() / "session.v4.jsonl.zstd"
    assert log.parent.parent.name == project_key(str(project))
    assert answer in read_log(log)


def test_resumed_fixture_session_replays_its_history_upstream(
    dsh_runtime, scripted_upstream, tmp_path
):
    # The uncleaned fixture still holds its reasoning loop, so the loop must reach the
    # upstream: this is the check a cleaned session has to pass the other way round.
    home, project = tmp_path / ".dsh", tmp_path / "proj"
    project.mkdir()
    session_id, _ = install_session_copy(home, SESSIONS / "a_reasoning_loop" / "session", project)
    scripted_upstream.enqueue(ScriptedResponse(text="Continuing from where we stopped."))

    run = run_dsh_headless(
        home,
        project,
        "continue",
        scripted_upstream.base_url,
        session_id=session_id,
        runtime=dsh_runtime,
    )

    assert run.returncode == 0, run.describe()
    assert run.session_id == session_id
    assert run.final_text == "Continuing from where we stopped."
    conversation = scripted_upstream.sent_text(include_dsh_extensions=False, purposes=["agent"])
    assert "Now. OK. Emit. Producing." in conversation
    assert "continue" in conversation


def test_headless_turn_with_a_tool_call_over_the_openai_route(
    dsh_runtime, scripted_upstream, tmp_path
):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "notes.txt").write_text("hello\n")
    scripted_upstream.enqueue(
        ScriptedResponse(
            reasoning="List the files first.",
            tool_calls=[ToolCall("bash", {"description": "List files", "command": "ls"})],
        ),
        ScriptedResponse(reasoning="Now answer.", text="There is one file: notes.txt."),
    )

    run = run_dsh_headless_openai(
        tmp_path / ".dsh",
        project,
        "List the files.",
        scripted_upstream.base_url,
        runtime=dsh_runtime,
    )

    assert run.returncode == 0, run.describe()
    assert run.final_text == "There is one file: notes.txt."
    assert run.events_of("tool_result")[0]["result"] == "notes.txt\n"
    second = scripted_upstream.agent_requests()[1]
    assert second.path == "/v1/chat/completions"
    assert second.body["messages"][-1] == {
        "role": "tool",
        "content": "notes.txt\n",
        "tool_call_id": run.events_of("tool_call")[0]["callId"],
    }
