"""Proof against the real DSH runtime: a cleaned session loads, and DSH no longer sends the
loop upstream when the session is resumed."""

from __future__ import annotations

import pytest
from tests.paths import SESSIONS
from tests.support.dsh_runtime import install_session_copy, run_dsh_headless
from tests.support.scripted_upstream import ScriptedResponse
from typer.testing import CliRunner

from looprescue.cli import app
from looprescue.detect import scan_text
from looprescue.dsh import open_log
from looprescue.dsh.findings import scan_events

pytestmark = pytest.mark.slow

EN_LOOP = "Now. OK. Emit. Producing. Now. OK. Emit. Producing."
ZH_LOOP = "好的。现在。输出。好的。现在。输出。"
PREAMBLE = "The user wants a summary of the config loader."


def anthropic_assistant_blocks(body: dict) -> list[tuple[str, str]]:
    """(channel, text) of every thinking/text block of the replayed assistant messages."""
    blocks = []
    for message in body["messages"]:
        if message["role"] != "assistant" or isinstance(message["content"], str):
            continue
        for block in message["content"]:
            if block["type"] == "thinking":
                blocks.append(("reasoning", block["thinking"]))
            elif block["type"] == "text":
                blocks.append(("text", block["text"]))
    return blocks


def test_dsh_resumes_a_cleaned_session_without_the_loop(dsh_runtime, scripted_upstream, tmp_path):
    home, project = tmp_path / ".dsh", tmp_path / "proj"
    project.mkdir()
    session_id, session_dir = install_session_copy(
        home, SESSIONS / "a_reasoning_loop" / "session", project
    )
    log = session_dir / "session.v4.jsonl.zstd"

    cleaned = CliRunner().invoke(
        app, ["clean", session_id, "--data", str(home / "sessions"), "--yes"]
    )
    assert cleaned.exit_code == 0, cleaned.output
    assert (home / "sessions-loop-rescue-backup").is_dir()

    scripted_upstream.enqueue(ScriptedResponse(text="Continuing without the loop."))
    run = run_dsh_headless(
        home,
        project,
        "continue",
        scripted_upstream.base_url,
        session_id=session_id,
        runtime=dsh_runtime,
    )

    # DSH loaded the cleaned log and ran the turn on it.
    assert run.returncode == 0, run.describe()
    assert run.session_id == session_id
    assert run.final_text == "Continuing without the loop."
    [request] = scripted_upstream.agent_requests()

    # The history DSH replays upstream has the useful part and the marker, but no loop.
    blocks = anthropic_assistant_blocks(request.body)
    reasoning = [text for channel, text in blocks if channel == "reasoning"]
    assert len(reasoning) == 1 and reasoning[0].startswith(PREAMBLE)
    assert "chars of repeated reasoning removed〕" in reasoning[0]
    for channel, text in blocks:
        assert scan_text(text, channel) == []
    everything = request.text(include_dsh_extensions=True)  # the uploaded session log too
    assert EN_LOOP not in everything and ZH_LOOP not in everything
    assert "continue" in request.text(include_dsh_extensions=False)

    # DSH appended its new turn after our frames; the whole log still reads cleanly.
    resumed = open_log(log)
    events = list(resumed.events())
    assert events[-1]["type"] == "turn/end" and events[-1]["data"]["turn"] == 2
    loops = [f for f in scan_events(events, session_id, str(log)) if f.is_loop]
    assert loops == []


def test_uncleaned_copy_still_sends_the_loop(dsh_runtime, scripted_upstream, tmp_path):
    # The control: without cleaning, the same resume sends the loop upstream, so the
    # assertions above can fail.
    home, project = tmp_path / ".dsh", tmp_path / "proj"
    project.mkdir()
    session_id, _ = install_session_copy(home, SESSIONS / "a_reasoning_loop" / "session", project)
    scripted_upstream.enqueue(ScriptedResponse(text="Continuing."))
    run = run_dsh_headless(
        home, project, "continue", scripted_upstream.base_url, session_id=session_id,
        runtime=dsh_runtime,
    )  # fmt: skip
    assert run.returncode == 0, run.describe()
    [request] = scripted_upstream.agent_requests()
    assert EN_LOOP in request.text(include_dsh_extensions=False)
    assert any(scan_text(t, c) for c, t in anthropic_assistant_blocks(request.body))


def test_openai_route_session_loads_after_cleaning(dsh_runtime, scripted_upstream, tmp_path):
    # j_openai_compat_provider was recorded over the pi-ai route, whose replayState we drop.
    # DSH must still load it and continue it. (Resumed under another provider name, DSH
    # replays no reasoning_content at all, cleaned or not, so only loading and the replayed
    # history are checked here; the native-route test above checks the reasoning.)
    home, project = tmp_path / ".dsh", tmp_path / "proj"
    project.mkdir()
    session_id, session_dir = install_session_copy(
        home, SESSIONS / "j_openai_compat_provider" / "session", project
    )
    cleaned = CliRunner().invoke(
        app, ["clean", session_id, "--data", str(home / "sessions"), "--yes"]
    )
    assert cleaned.exit_code == 0, cleaned.output
    assert "seq 32 (t2s1, line 34)" in cleaned.stdout
    scripted_upstream.enqueue(ScriptedResponse(text="Continuing."))
    run = run_dsh_headless(
        home, project, "continue", scripted_upstream.base_url, session_id=session_id,
        runtime=dsh_runtime, route="openai",
    )  # fmt: skip
    assert run.returncode == 0, run.describe()
    assert run.session_id == session_id and run.final_text == "Continuing."
    [request] = scripted_upstream.agent_requests()
    assert request.path == "/v1/chat/completions"
    conversation = request.text()
    assert "The loader applies bundle patches" in conversation  # t2's answer, replayed
    assert EN_LOOP not in conversation
    events = list(open_log(session_dir / "session.v4.jsonl.zstd").events())
    assert events[-1]["type"] == "turn/end" and events[-1]["data"]["turn"] == 3
