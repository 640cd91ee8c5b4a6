"""The scripted upstream, exercised with the real openai and anthropic clients over loopback."""

from __future__ import annotations

import copy
import threading

import anthropic
import httpx
import httpx2
import openai
import pytest
from tests.support.scripted_upstream import (
    ScriptedResponse,
    ScriptedUpstream,
    ToolCall,
    corpus_record,
    corpus_response,
    dsh_recorded_requests,
    parse_sse,
    purpose_is,
)

PROMPT = [{"role": "user", "content": "Explain the loader."}]


def anthropic_client(upstream: ScriptedUpstream, **options) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=upstream.base_url, api_key="k", max_retries=0, **options)


def openai_client(upstream: ScriptedUpstream, prefix: str = "/v1", **options) -> openai.OpenAI:
    return openai.OpenAI(base_url=upstream.base_url + prefix, api_key="k", max_retries=0, **options)


def reasoning_of(delta) -> str | None:
    return (delta.model_extra or {}).get("reasoning_content")


# ----------------------------------------------------------------- Anthropic Messages


def test_anthropic_stream_has_the_event_shape_dsh_accepts(scripted_upstream):
    scripted_upstream.enqueue(
        ScriptedResponse(
            reasoning="Let me list the files first.",
            text="Listing them now.",
            tool_calls=[ToolCall("bash", {"command": "ls", "description": "List files"})],
        )
    )
    client = anthropic_client(scripted_upstream)
    events = list(
        client.messages.create(model="deepseek-flash", max_tokens=100, messages=PROMPT, stream=True)
    )
    types = [e.type for e in events]
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    starts = [e.content_block.type for e in events if e.type == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use"]
    delta_kinds = {e.delta.type for e in events if e.type == "content_block_delta"}
    assert delta_kinds == {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"}
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    thinking = "".join(d.thinking for d in deltas if d.type == "thinking_delta")
    assert thinking == "Let me list the files first."
    assert events[-2].delta.stop_reason == "tool_use"
    assert events[-2].usage.output_tokens > 0


def test_anthropic_stream_accumulates_into_the_scripted_message(scripted_upstream):
    scripted_upstream.enqueue(
        ScriptedResponse(
            reasoning="Think.",
            text="Answer text.",
            tool_calls=[ToolCall("read", {"file_path": "a.txt"}, id="toolu_fixed")],
        )
    )
    client = anthropic_client(scripted_upstream)
    with client.messages.stream(model="m", max_tokens=100, messages=PROMPT) as stream:
        message = stream.get_final_message()
    thinking, text, tool = message.content
    assert (thinking.thinking, thinking.signature) == ("Think.", "scripted-sig-msg_scripted_0")
    assert text.text == "Answer text."
    assert (tool.id, tool.name, tool.input) == ("toolu_fixed", "read", {"file_path": "a.txt"})
    assert message.stop_reason == "tool_use"


def test_anthropic_non_streaming_returns_one_message(scripted_upstream):
    scripted_upstream.enqueue(ScriptedResponse(reasoning="Hmm.", text="Plain answer."))
    message = anthropic_client(scripted_upstream).messages.create(
        model="deepseek-flash", max_tokens=100, messages=PROMPT
    )
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[1].text == "Plain answer."
    assert message.stop_reason == "end_turn"
    assert message.model == "deepseek-flash"


def test_deltas_have_the_scripted_size_and_repeat_for_a_seed(scripted_upstream):
    text = "The quick brown fox jumps over the lazy dog, twice over. " * 3
    for _ in range(2):
        scripted_upstream.enqueue(ScriptedResponse(text=text, delta_chars=(2, 6), seed=7))
    scripted_upstream.enqueue(ScriptedResponse(text=text, delta_chars=(2, 6), seed=8))
    client = anthropic_client(scripted_upstream)
    runs = []
    for _ in range(3):
        stream = client.messages.create(model="m", max_tokens=10, messages=PROMPT, stream=True)
        runs.append([e.delta.text for e in stream if e.type == "content_block_delta"])
    assert runs[0] == runs[1] != runs[2]
    assert all("".join(run) == text for run in runs)
    assert all(2 <= len(piece) <= 6 for piece in runs[0][:-1])


def test_raw_wire_names_every_event_like_its_data_type(scripted_upstream):
    scripted_upstream.enqueue(ScriptedResponse(reasoning="ab", text="cd"))
    reply = httpx.post(
        scripted_upstream.url("/v1/messages"),
        json={"model": "m", "stream": True, "messages": PROMPT, "max_tokens": 5},
    )
    events = parse_sse(reply.text)
    assert reply.headers["content-type"].startswith("text/event-stream")
    assert all(name == data["type"] for name, data in events)
    assert "ping" in [name for name, _ in events]
    recorded = scripted_upstream.requests[-1]
    assert len(recorded.event_times) == recorded.events_sent == len(events)
    assert recorded.event_times == sorted(recorded.event_times)
    scripted_upstream.clear_requests()
    assert scripted_upstream.requests == []


SEARCH_BLOCKS = (
    {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "loop rescue"},
    },
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "title": "Loop rescue",
                "url": "https://example.com/a",
                "encrypted_content": "enc",
                "page_age": None,
            }
        ],
    },
)


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_server_tool_blocks_come_before_the_text(scripted_upstream, stream):
    scripted_upstream.enqueue(ScriptedResponse(server_blocks=SEARCH_BLOCKS, text="Found it."))
    client = anthropic_client(scripted_upstream)
    if stream:
        with client.messages.stream(model="m", max_tokens=100, messages=PROMPT) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(model="m", max_tokens=100, messages=PROMPT)
    use, result, text = message.content
    assert (use.type, use.id, use.name, use.input) == (
        "server_tool_use",
        "srvtoolu_1",
        "web_search",
        {"query": "loop rescue"},
    )
    assert (result.type, result.tool_use_id) == ("web_search_tool_result", "srvtoolu_1")
    assert result.content[0].url == "https://example.com/a"
    assert text.text == "Found it."


# ----------------------------------------------------------------- OpenAI Chat Completions


@pytest.mark.parametrize("prefix", ["/v1", ""])
def test_openai_stream_with_reasoning_tool_calls_and_usage(scripted_upstream, prefix):
    scripted_upstream.enqueue(
        ScriptedResponse(
            reasoning="First list the files.",
            text="Listing.",
            tool_calls=[ToolCall("bash", {"command": "ls"})],
        )
    )
    client = openai_client(scripted_upstream, prefix)
    chunks = list(
        client.chat.completions.create(
            model="deepseek-chat",
            messages=PROMPT,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    assert "".join(reasoning_of(d) or "" for d in deltas) == "First list the files."
    assert "".join(d.content or "" for d in deltas) == "Listing."
    calls = [call for d in deltas for call in d.tool_calls or []]
    assert calls[0].function.name == "bash" and calls[0].id.startswith("call_")
    assert "".join(c.function.arguments or "" for c in calls) == '{"command":"ls"}'
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert scripted_upstream.requests[-1].path == f"{prefix}/chat/completions"


def test_openai_stream_ends_with_done_and_omits_usage_unless_asked(scripted_upstream):
    reply = httpx.post(
        scripted_upstream.url("/v1/chat/completions"),
        json={"model": "m", "stream": True, "messages": PROMPT},
    )
    events = parse_sse(reply.text)
    assert events[-1] == (None, "[DONE]")
    assert all("usage" not in data for _, data in events[:-1])
    assert "".join(d["choices"][0]["delta"].get("content") or "" for _, d in events[:-1]) == (
        "Done."
    )


def test_openai_non_streaming_message(scripted_upstream):
    scripted_upstream.enqueue(
        ScriptedResponse(
            reasoning="Reason.", text="", tool_calls=[ToolCall("read", '{"file_path":"x"}')]
        )
    )
    completion = openai_client(scripted_upstream).chat.completions.create(
        model="deepseek-chat", messages=PROMPT
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert (choice.message.model_extra or {})["reasoning_content"] == "Reason."
    assert choice.message.tool_calls[0].function.arguments == '{"file_path":"x"}'


# ----------------------------------------------------------------- faults


def test_http_error_with_retry_after_surfaces_as_rate_limit(scripted_upstream):
    scripted_upstream.enqueue(ScriptedResponse(status=429, retry_after=1))
    with pytest.raises(anthropic.RateLimitError) as raised:
        anthropic_client(scripted_upstream).messages.create(
            model="m", max_tokens=10, messages=PROMPT, stream=True
        )
    assert raised.value.response.headers["retry-after"] == "1"
    assert raised.value.body["error"]["type"] == "rate_limit_error"


def test_http_error_body_is_passed_verbatim(scripted_upstream):
    body = {"error": {"message": "boom", "type": "server_error", "param": None, "code": "x1"}}
    scripted_upstream.enqueue(ScriptedResponse(status=500, error_body=body))
    with pytest.raises(openai.InternalServerError) as raised:
        openai_client(scripted_upstream).chat.completions.create(model="m", messages=PROMPT)
    assert raised.value.status_code == 500
    assert raised.value.body["code"] == "x1"
    assert scripted_upstream.requests[-1].outcome == "http_error"


def test_cut_connection_is_a_transport_error_for_both_clients(scripted_upstream):
    scripted_upstream.enqueue(
        ScriptedResponse(text="a long enough text to cut", cut_after=4),
        ScriptedResponse(text="a long enough text to cut", cut_after=4),
    )
    # the anthropic SDK wraps a failed read of the body in its own error, and lets one that
    # comes elsewhere (as the stream opens) through: which one depends on timing
    with pytest.raises((httpx2.RemoteProtocolError, anthropic.APIConnectionError)) as caught:
        for _ in anthropic_client(scripted_upstream).messages.create(
            model="m", max_tokens=10, messages=PROMPT, stream=True
        ):
            pass
    error = caught.value
    assert isinstance(error.__cause__ or error, httpx2.RemoteProtocolError)
    with pytest.raises(openai.APIConnectionError):
        for _ in openai_client(scripted_upstream).chat.completions.create(
            model="m", messages=PROMPT, stream=True
        ):
            pass
    assert [(r.outcome, r.events_sent) for r in scripted_upstream.requests] == [("cut", 4)] * 2


def test_non_streaming_cut_is_a_connection_error(scripted_upstream):
    scripted_upstream.enqueue(ScriptedResponse(text="whole body", cut_after=0))
    with pytest.raises(anthropic.APIConnectionError):
        anthropic_client(scripted_upstream).messages.create(
            model="m", max_tokens=5, messages=PROMPT
        )


def test_in_band_error_event(scripted_upstream):
    scripted_upstream.enqueue(
        ScriptedResponse(text="some words here", error_event_after=3),
        ScriptedResponse(text="some words here", error_event_after=3),
    )
    with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
        for _ in anthropic_client(scripted_upstream).messages.create(
            model="m", max_tokens=10, messages=PROMPT, stream=True
        ):
            pass
    with pytest.raises(openai.APIError, match="Overloaded"):
        for _ in openai_client(scripted_upstream).chat.completions.create(
            model="m", messages=PROMPT, stream=True
        ):
            pass
    assert {r.outcome for r in scripted_upstream.requests} == {"error_event"}


def test_stall_trips_the_client_read_timeout_and_is_seen_as_a_disconnect(scripted_upstream):
    scripted_upstream.enqueue(ScriptedResponse(text="abcdefgh", stall_after=3, stall_seconds=30))
    client = openai_client(scripted_upstream, timeout=0.3)
    received = []
    with pytest.raises(openai.APITimeoutError):
        for chunk in client.chat.completions.create(model="m", messages=PROMPT, stream=True):
            received.append(chunk)
    assert len(received) == 3
    assert scripted_upstream.wait_for(lambda up: up.requests[-1].client_disconnected)


def test_client_disconnect_is_recorded(scripted_upstream):
    scripted_upstream.enqueue(ScriptedResponse(text="x" * 400, delay=0.01))
    client = anthropic_client(scripted_upstream)
    stream = client.messages.create(model="m", max_tokens=10, messages=PROMPT, stream=True)
    for event in stream:
        if event.type == "content_block_delta":
            break
    stream.close()
    assert scripted_upstream.wait_for(lambda up: up.requests[-1].client_disconnected)
    assert scripted_upstream.requests[-1].events_sent < 100


# ----------------------------------------------------------------- script and recording


def test_dsh_title_request_does_not_consume_the_agent_script(scripted_upstream):
    title_row, agent_row = [
        next(r for r in dsh_recorded_requests("a_reasoning_loop") if r["purpose"] == purpose)
        for purpose in ("title", "agent")
    ]
    scripted_upstream.enqueue(ScriptedResponse(text="agent answer", label="agent-1"))
    headers = {"x-deepseek-harness-session-id": "session-x", "x-api-key": "k"}
    title_reply = httpx.post(
        scripted_upstream.url("/v1/messages"), json=title_row["body"], headers=headers
    )
    agent_reply = httpx.post(
        scripted_upstream.url("/v1/messages"), json=agent_row["body"], headers=headers
    )

    def text_of(reply):
        return "".join(
            d["delta"].get("text", "")
            for _, d in parse_sse(reply.text)
            if d["type"] == "content_block_delta"
        )

    assert text_of(title_reply) == "Explain how the profile config"
    assert text_of(agent_reply) == "agent answer"
    title, agent = scripted_upstream.requests
    assert (title.purpose, title.answered_with) == ("title", "title")
    assert (agent.purpose, agent.answered_with) == ("agent", "agent-1")
    assert agent.headers["x-deepseek-harness-session-id"] == "session-x"
    assert agent.body == agent_row["body"]


def test_match_predicate_and_default_after_the_script_runs_out(scripted_upstream):
    compaction_only = ScriptedResponse(text="summary", match=purpose_is("compaction"))
    scripted_upstream.enqueue(compaction_only, ScriptedResponse(text="first"))
    client = anthropic_client(scripted_upstream)

    def ask(**headers):
        message = client.messages.create(
            model="m", max_tokens=5, messages=PROMPT, extra_headers=headers
        )
        return message.content[0].text

    assert ask() == "first"
    assert ask() == "Done."
    assert scripted_upstream.remaining == 1
    assert ask(**{"x-deepseek-harness-compact": "1"}) == "summary"
    assert scripted_upstream.remaining == 0


def test_sent_text_collects_every_string_and_can_skip_dsh_extensions(scripted_upstream):
    # the second agent request: the read's failure is in its history
    agent_row = [
        r for r in dsh_recorded_requests("e_tool_error_two_turns") if r["purpose"] == "agent"
    ][1]
    body = copy.deepcopy(agent_row["body"])
    body["dsh_session_log"]["events"].append({"data": {"text": "ONLY-IN-LOG"}})
    httpx.post(scripted_upstream.url("/v1/messages"), json=body)
    assert "ONLY-IN-LOG" in scripted_upstream.sent_text()
    conversation = scripted_upstream.sent_text(include_dsh_extensions=False)
    assert "ONLY-IN-LOG" not in conversation
    assert "does-not-exist/notes.txt" in conversation


def test_corpus_loop_streams_in_its_channel(scripted_upstream):
    record = corpus_record("mrwei-bleed-27953")
    text_record = corpus_record("smollm2-en-list-names-t0.8")
    scripted_upstream.enqueue(
        corpus_response(record, answer="Final."), corpus_response(text_record, thinking="Hm.")
    )
    client = openai_client(scripted_upstream)
    outputs = []
    for _ in range(2):
        deltas = [
            c.choices[0].delta
            for c in client.chat.completions.create(model="m", messages=PROMPT, stream=True)
            if c.choices
        ]
        reasoning = "".join(reasoning_of(d) or "" for d in deltas)
        outputs.append((reasoning, "".join(d.content or "" for d in deltas)))
    assert outputs == [(record["text"], "Final."), ("Hm.", text_record["text"])]
    assert [r.answered_with for r in scripted_upstream.requests] == [
        f"corpus:{record['id']}",
        f"corpus:{text_record['id']}",
    ]


# ----------------------------------------------------------------- OpenAI Responses


def test_responses_stream_with_reasoning_text_and_a_function_call(scripted_upstream):
    scripted_upstream.enqueue(
        ScriptedResponse(
            reasoning="List first.",
            text="Listing.",
            tool_calls=[ToolCall("exec_command", {"cmd": "ls"}, id="call_fixed")],
            input_tokens=10,
        )
    )
    client = openai_client(scripted_upstream)
    stream = client.responses.create(model="m", input="List the files.", stream=True)
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    summary = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    arguments = "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta"
    )
    assert (summary, text, arguments) == ("List first.", "Listing.", '{"cmd":"ls"}')
    final = events[-1].response
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call"]
    assert final.output_text == "Listing."
    call = final.output[2]
    assert (call.call_id, call.name, call.arguments) == (
        "call_fixed",
        "exec_command",
        '{"cmd":"ls"}',
    )
    assert final.usage.input_tokens == 10 and final.usage.output_tokens > 0
    recorded = scripted_upstream.requests[-1]
    assert (recorded.protocol, recorded.path, recorded.stream) == (
        "responses",
        "/v1/responses",
        True,
    )


def test_responses_non_streaming_returns_the_whole_response(scripted_upstream):
    scripted_upstream.enqueue(ScriptedResponse(text="Plain answer."))
    response = openai_client(scripted_upstream).responses.create(model="m", input="Hi.")
    assert response.status == "completed" and response.output_text == "Plain answer."
    assert [item.type for item in response.output] == ["message"]


def test_responses_in_band_error_ends_the_stream(scripted_upstream):
    scripted_upstream.enqueue(ScriptedResponse(text="Partial answer.", error_event_after=3))
    reply = httpx.post(
        scripted_upstream.url("/v1/responses"),
        json={"model": "m", "input": "Hi.", "stream": True},
    )
    events = parse_sse(reply.text)
    assert [name for name, _ in events][-1] == "error"
    assert "response.completed" not in [name for name, _ in events]
    assert scripted_upstream.requests[-1].outcome == "error_event"


def test_unknown_paths_are_recorded_and_answered_404(scripted_upstream):
    reply = httpx.get(scripted_upstream.url("/v1/files/abc"), headers={"x-trace": "t1"})
    assert reply.status_code == 404
    recorded = scripted_upstream.requests[-1]
    assert (recorded.method, recorded.path, recorded.headers["x-trace"]) == (
        "GET",
        "/v1/files/abc",
        "t1",
    )


def test_stop_ends_in_flight_streams_and_leaves_no_thread():
    upstream = ScriptedUpstream([ScriptedResponse(text="abc", stall_after=2, stall_seconds=60)])
    upstream.start()
    received = []

    def consume():
        try:
            for event in anthropic_client(upstream).messages.create(
                model="m", max_tokens=5, messages=PROMPT, stream=True
            ):
                received.append(event)
        except Exception as exc:  # the stream is cut by the stop
            received.append(exc)

    consumer = threading.Thread(target=consume)
    consumer.start()
    assert upstream.wait_for(lambda up: bool(up.requests) and up.requests[0].events_sent == 2)
    upstream.stop()
    consumer.join(timeout=30)
    assert not consumer.is_alive()
    assert isinstance(received[-1], Exception)
    assert upstream.requests[0].outcome == "stopped"
    assert not [t for t in threading.enumerate() if t.name.startswith("scripted-upstream")]
