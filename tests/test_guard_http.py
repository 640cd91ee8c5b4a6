"""The tool-loop guard end to end: an agent whose model keeps asking for the same tool call,
through the real proxy on 127.0.0.1 and through ``wrap()``, with the real anthropic and openai
SDKs and the scripted upstream. The upstream gets the configured repeats plus one steered
request; then the guard answers by itself with a normal assistant message, and says so in the
``looprescue-outcome`` header, the audit log and ``/metrics``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from prometheus_client import CollectorRegistry
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream, ToolCall
from tests.test_proxy_http import ProxyServer

import looprescue
from looprescue.config import load_config

MODEL = "scripted-model"
FILES = "a.txt\nb.txt\nsrc\n"
NOTE_TAG = "[looprescue]"
OUTCOME = "looprescue-outcome"


def looping_model(upstream: ScriptedUpstream, answers: int = 12) -> None:
    """A model that answers every request with the same ``bash ls`` call."""
    call = ToolCall("bash", {"command": "ls"})
    upstream.enqueue(
        *(
            ScriptedResponse(reasoning="Let me list the files again.", tool_calls=[call])
            for _ in range(answers)
        )
    )


# --------------------------------------------------------------------------- agents


def run_tool(name: str, arguments: Any, step: int, results: Any) -> str:
    """What the agent's tool gives back: ``results(step)``, else the same listing each time."""
    return FILES if results is None else results(step)


def anthropic_agent(client: Any, stream: bool, results: Any = None) -> tuple[str, list[str | None]]:
    """Run tools until the model answers without one; its last text and each answer's outcome
    header. ``results``: the tool's result at each step (default: the same listing)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    outcomes: list[str | None] = []
    clients = client if isinstance(client, list) else [client]
    for step in range(20):
        client = clients[step % len(clients)]  # several clients: each step to the next one
        if stream:
            with client.messages.stream(model=MODEL, max_tokens=512, messages=messages) as s:
                message = s.get_final_message()
                outcomes.append(s.response.headers.get(OUTCOME))
        else:
            raw = client.messages.with_raw_response.create(
                model=MODEL, max_tokens=512, messages=messages
            )
            message = raw.parse()
            outcomes.append(raw.headers.get(OUTCOME))
        calls = [block for block in message.content if block.type == "tool_use"]
        if not calls:
            assert message.stop_reason == "end_turn"
            return "".join(b.text for b in message.content if b.type == "text"), outcomes
        content = [block.model_dump(exclude_none=True) for block in message.content]
        messages.append({"role": "assistant", "content": content})
        answers = [
            {
                "type": "tool_result",
                "tool_use_id": c.id,
                "content": run_tool(c.name, c.input, step, results),
            }
            for c in calls
        ]
        messages.append({"role": "user", "content": answers})
    raise AssertionError("the agent never stopped")


def openai_agent(
    client: Any, stream: bool, model: str = MODEL, results: Any = None
) -> tuple[str, list[str | None]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    outcomes: list[str | None] = []
    for step in range(20):
        calls: dict[int, dict[str, str]] = {}
        if stream:
            chunks = client.chat.completions.create(model=model, messages=messages, stream=True)
            outcomes.append(chunks.response.headers.get(OUTCOME))
            text, finish = "", None
            for chunk in chunks:
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    finish = choice.finish_reason or finish
                    for part in choice.delta.tool_calls or ():
                        call = calls.setdefault(part.index, {"id": "", "name": "", "args": ""})
                        call["id"] = part.id or call["id"]
                        if part.function is not None:
                            call["name"] += part.function.name or ""
                            call["args"] += part.function.arguments or ""
        else:
            raw = client.chat.completions.with_raw_response.create(model=model, messages=messages)
            outcomes.append(raw.headers.get(OUTCOME))
            choice = raw.parse().choices[0]
            text, finish = choice.message.content or "", choice.finish_reason
            for number, tool_call in enumerate(choice.message.tool_calls or ()):
                function = tool_call.function
                calls[number] = {
                    "id": tool_call.id,
                    "name": function.name,
                    "args": function.arguments,
                }
        if not calls:
            assert finish == "stop"
            return text, outcomes
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["args"]},
                    }
                    for c in calls.values()
                ],
            }
        )
        for c in calls.values():
            content = run_tool(c["name"], c["args"], step, results)
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": content})
    raise AssertionError("the agent never stopped")


def responses_agent(client: Any, stream: bool, model: str = MODEL) -> tuple[str, list[str | None]]:
    """The agent loop on the Responses API, as Codex CLI runs it: the whole output goes back
    as input, each call's output after it. Every item the client gets must be whole (a type
    and an id), as Codex refuses text whose item has none."""
    items: list[Any] = [{"role": "user", "content": "List the files."}]
    outcomes: list[str | None] = []
    for _ in range(20):
        if stream:
            with client.responses.stream(model=model, input=items) as events:
                response = events.get_final_response()
                outcomes.append(events._response.headers.get(OUTCOME))
        else:
            raw = client.responses.with_raw_response.create(model=model, input=items)
            response = raw.parse()
            outcomes.append(raw.headers.get(OUTCOME))
        assert all(item.type and item.id for item in response.output), response.output
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            assert response.status == "completed"
            return response.output_text, outcomes
        items += [item.model_dump(exclude_none=True) for item in response.output]
        items += [
            {"type": "function_call_output", "call_id": c.call_id, "output": FILES} for c in calls
        ]
    raise AssertionError("the agent never stopped")


def last_user_text(body: dict[str, Any]) -> str:
    last = (body.get("messages") or body["input"])[-1]
    content = last.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or () if isinstance(b, dict))


def assert_steered_then_stopped(
    upstream: ScriptedUpstream,
    text: str,
    outcomes: list[str | None],
    repeats: int,
    headers: bool = True,
) -> None:
    sent = upstream.agent_requests()
    # the configured repeats plus one steered request, then nothing more
    assert len(sent) == repeats + 1
    assert all(NOTE_TAG not in last_user_text(r.body) for r in sent[:-1])
    note = last_user_text(sent[-1].body)
    assert NOTE_TAG in note and 'bash {"command":"ls"}' in note and "not changed" in note
    if headers:
        assert outcomes == [None] * repeats + ["tool-loop-steered", "tool-loop-stopped"]
    assert text.startswith(f"{NOTE_TAG} Stopped: the agent is stuck in a tool-call loop.")
    assert f'bash {{"command":"ls"}} {repeats + 1} times' in text


# --------------------------------------------------------------------------- through the proxy

CASES = [
    ("anthropic", False),
    ("anthropic", True),
    ("openai", False),
    ("openai", True),
    ("responses", False),
    ("responses", True),
]


@pytest.mark.parametrize(
    ("protocol", "stream"), CASES, ids=[f"{p}-{'stream' if s else 'whole'}" for p, s in CASES]
)
def test_a_tool_loop_through_the_proxy_is_steered_then_stopped(
    scripted_upstream: ScriptedUpstream, tmp_path: Path, protocol: str, stream: bool
) -> None:
    looping_model(scripted_upstream)
    audit = tmp_path / "audit.jsonl"
    config = load_config(None, {"proxy.auditLog": str(audit)})
    config = config.model_copy(
        update={
            "toolGuard": config.toolGuard.model_copy(update={"inputPrices": {"scripted-*": 2.0}})
        }
    )
    registry = CollectorRegistry()
    with ProxyServer(config, scripted_upstream.base_url, metrics_registry=registry) as proxy:
        if protocol == "anthropic":
            client = anthropic.Anthropic(base_url=proxy.base_url, api_key="k", max_retries=0)
            text, outcomes = anthropic_agent(client, stream)
        elif protocol == "openai":
            client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="k", max_retries=0)
            text, outcomes = openai_agent(client, stream)
        else:
            client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="k", max_retries=0)
            text, outcomes = responses_agent(client, stream)
        exposition = httpx.get(proxy.base_url + "/metrics").text
    samples = {
        (outcome, name): registry.get_sample_value(
            f"looprescue_tool_loop_{name}_total",
            {"protocol": protocol, "adapter": "proxy", "outcome": outcome},
        )
        for outcome in ("spent", "saved")
        for name in ("tokens", "dollars")
    }
    assert_steered_then_stopped(scripted_upstream, text, outcomes, repeats=5)
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    loops = [r for r in records if r["kind"] == "tool_loop"]
    assert [r["outcome"] for r in loops] == ["tool-loop-steered", "tool-loop-stopped"]
    assert loops[-1]["loop"] == "repeat" and loops[-1]["tools"] == ["bash"]
    assert loops[-1]["count"] == 6 and loops[-1]["protocol"] == protocol
    # what the loop cost: the steered request and the ones before it spent, the stop saved
    steered, stopped = loops
    assert steered["loop_tokens"] > steered["request_tokens"] > 0
    assert samples["spent", "tokens"] == steered["loop_tokens"]
    assert samples["saved", "tokens"] == stopped["saved_tokens"] == stopped["request_tokens"]
    assert stopped["loop_tokens"] == steered["loop_tokens"] + stopped["request_tokens"]
    assert samples["saved", "dollars"] == pytest.approx(stopped["saved_tokens"] * 2.0 / 1e6)
    assert stopped["saved_dollars"] == round(stopped["saved_tokens"] * 2.0 / 1e6, 6)
    assert "looprescue_tool_loop_tokens_total" in exposition
    for outcome in ("steer", "stop"):
        line = (
            f'looprescue_tool_loops_total{{adapter="proxy",kind="repeat",outcome="{outcome}",'
            f'protocol="{protocol}"}} 1.0'
        )
        assert line in exposition


def test_the_thresholds_and_rungs_come_from_the_config(scripted_upstream: ScriptedUpstream) -> None:
    looping_model(scripted_upstream)
    config = load_config(None, {"toolGuard.repeatCalls": "3", "toolGuard.steer": "false"})
    with ProxyServer(
        config, scripted_upstream.base_url, metrics_registry=CollectorRegistry()
    ) as proxy:
        client = anthropic.Anthropic(base_url=proxy.base_url, api_key="k", max_retries=0)
        text, outcomes = anthropic_agent(client, stream=True)
    sent = scripted_upstream.agent_requests()
    assert len(sent) == 3 and all(NOTE_TAG not in last_user_text(r.body) for r in sent)
    assert outcomes == [None, None, None, "tool-loop-stopped"]
    assert "This step was not sent to the model" in text


def test_observe_mode_records_the_loop_and_changes_nothing(
    scripted_upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    scripted_upstream.enqueue(
        *(ScriptedResponse(tool_calls=[ToolCall("bash", {"command": "ls"})]) for _ in range(7)),
        ScriptedResponse(text="Here are the files."),
    )
    audit = tmp_path / "audit.jsonl"
    config = load_config(None, {"mode": "observe", "proxy.auditLog": str(audit)})
    with ProxyServer(
        config, scripted_upstream.base_url, metrics_registry=CollectorRegistry()
    ) as proxy:
        client = anthropic.Anthropic(base_url=proxy.base_url, api_key="k", max_retries=0)
        text, outcomes = anthropic_agent(client, stream=False)
    assert text == "Here are the files."
    assert len(scripted_upstream.agent_requests()) == 8
    assert all(NOTE_TAG not in r.text() for r in scripted_upstream.agent_requests())
    assert outcomes == [None] * 5 + ["tool-loop-observed"] * 3
    kinds = [json.loads(line)["kind"] for line in audit.read_text().splitlines()]
    assert kinds.count("tool_loop") == 3


def polling_model(upstream: ScriptedUpstream, polls: int) -> None:
    """A model that polls a job's status ``polls`` times, then answers."""
    call = ToolCall("job_status", {"id": "build-17"})
    upstream.enqueue(
        *(ScriptedResponse(reasoning="Still running?", tool_calls=[call]) for _ in range(polls)),
        ScriptedResponse(text="The build finished."),
    )


def job_progress(step: int) -> str:
    # the same status a few times in a row, then progress, as a slow job reports it
    percent = [0, 0, 0, 0, 20, 20, 20, 20, 55, 55, 90, 100][step]
    state = "done" if percent == 100 else "running"
    return f"[2026-12-03T17:{step:02d}:07Z] build-17 {state} {percent}% (elapsed {step * 30}s)"


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
def test_polling_a_job_until_it_finishes_goes_through_untouched(
    scripted_upstream: ScriptedUpstream, protocol: str
) -> None:
    polling_model(scripted_upstream, polls=12)
    config = load_config(None, {})
    with ProxyServer(
        config, scripted_upstream.base_url, metrics_registry=CollectorRegistry()
    ) as proxy:
        if protocol == "anthropic":
            client = anthropic.Anthropic(base_url=proxy.base_url, api_key="k", max_retries=0)
            text, outcomes = anthropic_agent(client, True, results=job_progress)
        else:
            client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="k", max_retries=0)
            text, outcomes = openai_agent(client, True, results=job_progress)
    assert text == "The build finished."
    assert outcomes == [None] * 13
    sent = scripted_upstream.agent_requests()
    assert len(sent) == 13 and all(NOTE_TAG not in r.text() for r in sent)


def test_the_count_holds_across_instances_that_share_nothing(
    scripted_upstream: ScriptedUpstream,
) -> None:
    # each step of the agent goes to the other of two proxies (as with --workers or a load
    # balancer): the guard counts from the history the request carries
    looping_model(scripted_upstream)
    config = load_config(None, {})
    with (
        ProxyServer(
            config, scripted_upstream.base_url, metrics_registry=CollectorRegistry()
        ) as one,
        ProxyServer(
            config, scripted_upstream.base_url, metrics_registry=CollectorRegistry()
        ) as two,
    ):
        clients = [
            anthropic.Anthropic(base_url=proxy.base_url, api_key="k", max_retries=0)
            for proxy in (one, two)
        ]
        text, outcomes = anthropic_agent(clients, stream=False)
    assert_steered_then_stopped(scripted_upstream, text, outcomes, repeats=5)


# --------------------------------------------------------------------------- through wrap()


@pytest.mark.parametrize(
    ("protocol", "stream"), CASES, ids=[f"{p}-{'stream' if s else 'whole'}" for p, s in CASES]
)
def test_a_tool_loop_through_wrap_is_steered_then_stopped(
    scripted_upstream: ScriptedUpstream, protocol: str, stream: bool
) -> None:
    looping_model(scripted_upstream)
    registry = CollectorRegistry()
    if protocol == "anthropic":
        plain = anthropic.Anthropic(base_url=scripted_upstream.base_url, api_key="k", max_retries=0)
        text, outcomes = anthropic_agent(looprescue.wrap(plain, registry=registry), stream)
    else:
        plain = openai.OpenAI(
            base_url=scripted_upstream.base_url + "/v1", api_key="k", max_retries=0
        )
        agent = openai_agent if protocol == "openai" else responses_agent
        text, outcomes = agent(looprescue.wrap(plain, registry=registry), stream)
    assert_steered_then_stopped(scripted_upstream, text, outcomes, repeats=5)
    labels = {"protocol": protocol, "adapter": "sdk", "kind": "repeat", "outcome": "stop"}
    assert registry.get_sample_value("looprescue_tool_loops_total", labels) == 1.0


async def async_anthropic_agent(client: Any, stream: bool) -> tuple[str, list[str | None]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    outcomes: list[str | None] = []
    for _ in range(20):
        if stream:
            async with client.messages.stream(
                model=MODEL, max_tokens=512, messages=messages
            ) as events:
                message = await events.get_final_message()
                outcomes.append(events.response.headers.get(OUTCOME))
        else:
            raw = await client.messages.with_raw_response.create(
                model=MODEL, max_tokens=512, messages=messages
            )
            message = await raw.parse()
            outcomes.append(raw.headers.get(OUTCOME))
        calls = [block for block in message.content if block.type == "tool_use"]
        if not calls:
            return "".join(b.text for b in message.content if b.type == "text"), outcomes
        content = [block.model_dump(exclude_none=True) for block in message.content]
        messages.append({"role": "assistant", "content": content})
        answers = [{"type": "tool_result", "tool_use_id": c.id, "content": FILES} for c in calls]
        messages.append({"role": "user", "content": answers})
    raise AssertionError("the agent never stopped")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_tool_loop_through_an_async_wrapped_client_is_steered_then_stopped(
    scripted_upstream: ScriptedUpstream, stream: bool
) -> None:
    looping_model(scripted_upstream)

    async def run() -> tuple[str, list[str | None]]:
        plain = anthropic.AsyncAnthropic(
            base_url=scripted_upstream.base_url, api_key="k", max_retries=0
        )
        client = looprescue.wrap(plain, registry=CollectorRegistry())
        try:
            return await async_anthropic_agent(client, stream)
        finally:
            await client.close()

    text, outcomes = asyncio.run(run())
    assert_steered_then_stopped(scripted_upstream, text, outcomes, repeats=5)
