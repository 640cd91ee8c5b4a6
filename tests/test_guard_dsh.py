"""The tool-loop guard with the real DSH runtime: ``dsh headless`` -> looprescue proxy ->
scripted model that asks for the same ``bash ls`` call at every step. DSH reminds the model
itself after 3 and 5 identical calls; the guard steers the 6th request and answers the 7th by
itself, and DSH ends the turn cleanly with the guard's message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from tests.support.dsh_runtime import run_dsh_headless
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream, ToolCall
from tests.test_proxy_http import ProxyServer

from looprescue.config import LoopRescueConfig

pytestmark = pytest.mark.slow

NOTE = '[looprescue] You have called bash {"command":"ls","description":"List files"} 5 times'
STOPPED = "[looprescue] Stopped: the agent is stuck in a tool-call loop."
DSH_REMINDER = "consecutive_calls: 5"  # DSH's own repeat-tool reminder after the 5th call


@pytest.mark.parametrize("route", ["anthropic", "openai"])
def test_dsh_looping_on_one_tool_call_ends_its_turn_with_the_guards_message(
    dsh_runtime: Any, tmp_path: Path, route: str
) -> None:
    home, project = tmp_path / ".dsh", tmp_path / "proj"
    project.mkdir(parents=True)
    for name in ("a.txt", "b.txt"):
        (project / name).write_text(name)
    call = ToolCall("bash", {"command": "ls", "description": "List files"})
    with ScriptedUpstream() as upstream:
        upstream.enqueue(
            *(
                ScriptedResponse(reasoning="Let me list the files again.", tool_calls=[call])
                for _ in range(12)
            )
        )
        config = LoopRescueConfig()
        with ProxyServer(config, upstream.base_url, metrics_registry=CollectorRegistry()) as proxy:
            run = run_dsh_headless(
                home,
                project,
                "List the files in this project.",
                proxy.base_url,
                route=route,
                runtime=dsh_runtime,
            )
        agent = upstream.agent_requests()

    assert run.returncode == 0, run.describe()
    assert run.final_text.startswith(STOPPED), run.final_text
    # the configured repeats plus one steered request reached the model
    assert len(agent) == config.toolGuard.repeatCalls + 1
    texts = [json.dumps(r.body, ensure_ascii=False) for r in agent]
    assert all("[looprescue]" not in text for text in texts[:-1])
    # the steered request carries DSH's own reminder and the guard's note, side by side
    assert NOTE.replace('"', '\\"') in texts[-1]
    assert DSH_REMINDER in texts[-1]
