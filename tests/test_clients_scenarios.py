"""The scripted model of ``make e2e-clients`` tells apart the requests a real client sends.

Each case sends what one of the clients sends (a turn, a turn with a tool result, the proxy's
continuation, a title or web search side request) with the real SDKs, over loopback.
"""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest
from e2e.clients.scenarios import (
    SCENARIOS,
    SEARCH_LOOP_UNIT,
    SEARCH_URL,
    SIDE_ANSWER,
    TEXT_UNIT,
    Responder,
)
from tests.support.scripted_upstream import ScriptedUpstream

GLOB = ("glob", {"pattern": "*.txt"})


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream(answer_titles=False) as up:
        up.add_rule(lambda _request: True, Responder(GLOB), label="scenario")
        yield up


def chat(upstream: ScriptedUpstream, messages: list[dict], **extra) -> dict:
    client = openai.OpenAI(base_url=upstream.base_url + "/v1", api_key="k", max_retries=0)
    tools = [{"type": "function", "function": {"name": "glob", "parameters": {"type": "object"}}}]
    completion = client.chat.completions.create(model="m", messages=messages, tools=tools, **extra)
    message = completion.choices[0].message
    return {
        "text": message.content or "",
        "calls": [(c.function.name, c.function.arguments) for c in message.tool_calls or ()],
    }


def prompt(scenario: str) -> dict:
    return {"role": "user", "content": SCENARIOS[scenario].full_prompt()}


def test_a_looping_turn_and_its_continuation(upstream: ScriptedUpstream) -> None:
    first = chat(upstream, [prompt("loop-text")])
    assert (TEXT_UNIT * 3) in first["text"]
    kept = {"role": "assistant", "content": "Here is what I will do. " + TEXT_UNIT}
    correction = {"role": "user", "content": "[looprescue] Your previous answer started repeating."}
    second = chat(upstream, [prompt("loop-text"), kept, correction])
    assert second["text"] == "The notes file says hello."


def test_the_step_is_the_number_of_tool_results(upstream: ScriptedUpstream) -> None:
    first = chat(upstream, [prompt("tool")])
    assert first["calls"] == [("glob", '{"pattern":"*.txt"}')]
    call = {"id": "c1", "type": "function", "function": {"name": "glob", "arguments": "{}"}}
    history = [
        prompt("tool"),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "notes.txt"},
    ]
    assert chat(upstream, history)["text"] == SCENARIOS["tool"].final


def test_a_continuation_of_a_loop_before_a_tool_call_makes_the_call(
    upstream: ScriptedUpstream,
) -> None:
    first = chat(upstream, [prompt("loop-then-tool")])
    assert first["calls"] == [("glob", '{"pattern":"*.txt"}')]
    correction = {"role": "user", "content": "[looprescue] Your reasoning started repeating."}
    again = chat(upstream, [prompt("loop-then-tool"), correction])
    assert again["calls"] == first["calls"]


def test_a_title_request_gets_the_side_answer_though_it_quotes_the_prompt(
    upstream: ScriptedUpstream,
) -> None:
    client = openai.OpenAI(base_url=upstream.base_url + "/v1", api_key="k", max_retries=0)
    completion = client.chat.completions.create(
        model="m",
        messages=[
            {"role": "user", "content": "Generate a title for this conversation:\n"},
            prompt("loop-text"),
        ],
    )
    assert completion.choices[0].message.content == SIDE_ANSWER


def test_the_first_request_of_a_step_fails_and_its_retry_succeeds(
    upstream: ScriptedUpstream,
) -> None:
    with pytest.raises(openai.InternalServerError):
        chat(upstream, [prompt("upstream-error")])
    assert chat(upstream, [prompt("upstream-error")])["text"] == SCENARIOS["upstream-error"].final


@pytest.mark.parametrize("scenario", ["server-tools", "server-tools-loop"])
def test_claude_codes_web_search_request_gets_server_tool_blocks(
    upstream: ScriptedUpstream, scenario: str
) -> None:
    client = anthropic.Anthropic(base_url=upstream.base_url, api_key="k", max_retries=0)
    query = SCENARIOS[scenario].search_query
    with client.messages.stream(
        model="m",
        max_tokens=100,
        messages=[{"role": "user", "content": f"Perform a web search for the query: {query}"}],
        tools=[{"type": "web_search_20250305", "name": "web_search", "max_uses": 8}],
    ) as stream:
        message = stream.get_final_message()
    use, result, text = message.content
    assert (use.type, result.type, result.content[0].url) == (
        "server_tool_use",
        "web_search_tool_result",
        SEARCH_URL,
    )
    assert ((SEARCH_LOOP_UNIT * 3) in text.text) == (scenario == "server-tools-loop")


def test_codex_tool_results_count_in_the_responses_api(upstream: ScriptedUpstream) -> None:
    client = openai.OpenAI(base_url=upstream.base_url + "/v1", api_key="k", max_retries=0)
    tagged = SCENARIOS["tool"].full_prompt()
    first = client.responses.create(model="m", input=tagged)
    reasoning, call = first.output
    assert (reasoning.type, call.type, call.name) == ("reasoning", "function_call", "glob")
    second = client.responses.create(
        model="m",
        input=[
            {"role": "user", "content": tagged},
            {"type": "function_call", "call_id": call.call_id, "name": "glob", "arguments": "{}"},
            {"type": "function_call_output", "call_id": call.call_id, "output": "notes.txt"},
        ],
    )
    assert second.output_text == SCENARIOS["tool"].final
