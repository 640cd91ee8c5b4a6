"""Real DSH end to end: ``dsh headless`` -> looprescue proxy -> scripted upstream whose first
answer loops in its reasoning. DSH must complete the turn and the session file it writes must
hold no loop text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import zstandard
from tests.paths import SESSIONS
from tests.support.dsh_runtime import run_dsh_headless
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream, corpus_record
from tests.test_proxy_http import ProxyServer

from looprescue.config import LoopRescueConfig
from looprescue.detect import scan_text

pytestmark = pytest.mark.slow

ANSWER = "The loader applies the bundle, then the profile, then the home and --patch overlays."


def fixture_loop_reasoning() -> str:
    """The looping reasoning DSH recorded in the a_reasoning_loop fixture (FORMAT.md §8.1)."""
    log = SESSIONS / "a_reasoning_loop" / "session" / "session.v4.jsonl"
    for line in log.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("type") == "assistant/message":
            for block in event["data"]["message"]["content"]:
                if block["type"] == "reasoning":
                    return block["text"]
    raise AssertionError(f"{log}: no reasoning block")


def session_events(session_dir: Path) -> list[dict[str, Any]]:
    path = session_dir / "session.v4.jsonl.zstd"
    with path.open("rb") as handle:
        reader = zstandard.ZstdDecompressor().stream_reader(handle, read_across_frames=True)
        text = reader.read().decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("route", ["anthropic", "openai"])
def test_dsh_turn_through_the_proxy_keeps_the_loop_out_of_the_session(
    dsh_runtime: Any, tmp_path: Path, route: str
) -> None:
    loop = fixture_loop_reasoning()
    (hit,) = scan_text(loop, "reasoning")
    dropped = loop[hit.prune_offset :]
    home, project = tmp_path / ".dsh", tmp_path / "proj"
    with ScriptedUpstream() as upstream:
        upstream.enqueue(
            ScriptedResponse(reasoning=loop, text="This answer must never be seen."),
            ScriptedResponse(reasoning="Summarise the layer order once.", text=ANSWER),
        )
        with ProxyServer(LoopRescueConfig(), upstream.base_url) as proxy:
            run = run_dsh_headless(
                home,
                project,
                "Explain how the profile config loader composes layers.",
                proxy.base_url,
                route=route,
                runtime=dsh_runtime,
            )
            totals = proxy.totals
        agent = upstream.agent_requests()

    assert run.returncode == 0, run.describe()
    assert run.final_text == ANSWER
    assert totals.rescues == 1 and totals.leaked_loop_chars == 0
    assert len(agent) == 2
    continuation = agent[1].body
    assert "dsh_session_log" not in continuation and "dsh_plugin_packages" not in continuation
    if route == "anthropic":
        assert "dsh_session_log" in agent[0].body  # the client's own request is untouched

    events = session_events(run.session_dir())
    messages = [e for e in events if e["type"] == "assistant/message"]
    assert len(messages) == 1
    blocks = messages[0]["data"]["message"]["content"]
    reasoning = "".join(b["text"] for b in blocks if b["type"] == "reasoning")
    text = "".join(b["text"] for b in blocks if b["type"] == "text")
    assert reasoning.startswith(loop[: hit.prune_offset])
    assert "Summarise the layer order once." in reasoning
    assert text == ANSWER
    # No loop text anywhere in the file DSH wrote: not the dropped span, not a confirmed loop.
    raw = json.dumps(events, ensure_ascii=False)
    assert dropped[:120] not in raw
    for block in blocks:
        if block["type"] in ("reasoning", "text"):
            channel = "reasoning" if block["type"] == "reasoning" else "text"
            assert scan_text(block["text"], channel) == [], block["text"][:200]


def test_dsh_turn_with_a_looping_answer_text(dsh_runtime: Any, tmp_path: Path) -> None:
    """A loop in the visible text: the thinking before it stays signed, the kept text and the
    continuation arrive as separate blocks (the continuation's thinking is not shown: no
    reasoning block follows text), and DSH completes the turn."""
    record = corpus_record("smollm2-en-explain-tcp-t0")
    (hit,) = scan_text(record["text"], "text")
    home, project = tmp_path / ".dsh", tmp_path / "proj"
    with ScriptedUpstream() as upstream:
        upstream.enqueue(
            ScriptedResponse(reasoning="Answer the question.", text=record["text"]),
            ScriptedResponse(reasoning="Finish the answer.", text=ANSWER),
        )
        with ProxyServer(LoopRescueConfig(), upstream.base_url) as proxy:
            run = run_dsh_headless(
                home, project, "Explain the loader.", proxy.base_url, runtime=dsh_runtime
            )
            totals = proxy.totals
    assert run.returncode == 0, run.describe()
    assert totals.rescues == 1 and totals.leaked_loop_chars == 0
    events = session_events(run.session_dir())
    (message,) = [e for e in events if e["type"] == "assistant/message"]
    blocks = message["data"]["message"]["content"]
    assert [b["type"] for b in blocks] == ["reasoning", "text", "text"]
    assert blocks[1]["text"].startswith(record["text"][: hit.prune_offset])
    assert blocks[2]["text"] == ANSWER
    replay = message["data"]["message"]["source"]["replayState"]["blocks"]
    assert replay[0].get("signature")
    # the repeated paragraph is kept once more (its first copy as a loop) than the text before
    # the loop holds it, and never again in what DSH replays
    unit = record["text"][hit.loop_start : hit.prune_offset]
    before_loop = record["text"][: hit.loop_start].count(unit)
    assert "".join(b.get("text", "") for b in blocks).count(unit) == before_loop + 1
    assert scan_text(blocks[1]["text"], "text") == []
