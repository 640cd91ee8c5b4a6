"""Conversation identity and language, continuation requests and request tweaks, on the
requests real DSH sent (tests/fixtures/sessions/*/upstream-requests.jsonl.zstd)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests.support.scripted_upstream import dsh_recorded_requests

from looprescue.config import NULL, load_config
from looprescue.rescue.continuation import KeptWork, LoopSummary, build_continuation
from looprescue.rescue.conversation import (
    ConversationStore,
    conversation_key,
    conversation_language,
    text_language,
)
from looprescue.rescue.marker import marker, shorten, stall_nudge
from looprescue.wire.anthropic import AnthropicWire
from looprescue.wire.openai import OpenAIWire

LOOP = LoopSummary("reasoning", "Now. OK. Emit. Producing.")


def recorded(scenario: str) -> list[dict[str, Any]]:
    return dsh_recorded_requests(scenario)


def agent_requests(scenario: str) -> list[dict[str, Any]]:
    return [r for r in recorded(scenario) if r["purpose"] == "agent"]


# --------------------------------------------------------------------------- identity


def test_dsh_session_header_identifies_the_conversation() -> None:
    request = agent_requests("a_reasoning_loop")[0]
    key = conversation_key(request["headers"], request["body"])
    assert (
        key
        == f"x-deepseek-harness-session-id:{request['headers']['x-deepseek-harness-session-id']}"
    )
    explicit = conversation_key({"X-LoopRescue-Session": "abc"}, request["body"])
    assert explicit == "x-looprescue-session:abc"


PROMPT = {"messages": [{"role": "user", "content": "Explain the loader."}]}


@pytest.mark.parametrize(
    ("headers", "body", "key"),
    [
        ({"X-Claude-Code-Session-Id": "cc-1"}, PROMPT, "x-claude-code-session-id:cc-1"),
        ({"session_id": "codex-1"}, PROMPT, "session_id:codex-1"),
        ({}, {**PROMPT, "prompt_cache_key": "conv-9"}, "prompt_cache_key:conv-9"),
        (
            {},
            {**PROMPT, "metadata": {"user_id": "user_a_session_b"}},
            "metadata.user_id:user_a_session_b",
        ),
        ({}, {**PROMPT, "user": "u-7"}, "user:u-7"),
        ({}, {**PROMPT, "dsh_session_log": {"session": {"id": "s-3"}}}, "dsh_session:s-3"),
    ],
)
def test_a_client_session_identifier_names_the_conversation(
    headers: dict[str, str], body: dict[str, Any], key: str
) -> None:
    assert conversation_key(headers, body) == key
    # the two routes never share a conversation, even under one identifier
    assert conversation_key(headers, body, "anthropic") == "anthropic/" + key
    assert conversation_key(headers, body, "openai") != conversation_key(headers, body, "anthropic")


def test_a_first_turn_without_an_identifier_belongs_to_no_conversation() -> None:
    """Independent requests with one prompt cannot be told apart from one chat's first turn:
    they share nothing. From the first answer on, the history names the chat."""
    turns = agent_requests("j_openai_compat_provider")
    assert len(turns) == 3
    assert conversation_key({}, turns[0]["body"]) is None
    later = {conversation_key({}, r["body"]) for r in turns[1:]}
    assert len(later) == 1 and None not in later
    # another chat that began with the same prompt: a different first answer
    other = copy.deepcopy(turns[2]["body"])
    first_answer = next(m for m in other["messages"] if m["role"] == "assistant")
    first_answer["content"] = "Another answer."
    first_answer.pop("tool_calls", None)
    assert conversation_key({}, other) not in later


def test_store_is_a_bounded_lru() -> None:
    store = ConversationStore(capacity=2)
    store.get("a").consecutive_rescues = 2
    store.get("b")
    store.get("a")
    store.get("c")
    assert "a" in store and "c" in store and "b" not in store and len(store) == 2
    assert store.get("a").consecutive_rescues == 2
    with pytest.raises(ValueError):
        ConversationStore(0)


def test_language_follows_the_human_not_the_runtime_context() -> None:
    body = agent_requests("a_reasoning_loop")[0]["body"]
    assert conversation_language(body) == "en"
    zh_openai = {
        "messages": [
            {"role": "system", "content": "You are an AI agent."},
            {"role": "user", "content": "解释一下配置加载器是怎么组合各层的。"},
            {"role": "user", "content": "Current runtime context. " * 40},
        ]
    }
    assert conversation_language(zh_openai) == "zh"
    assert conversation_language(zh_openai, "en") == "en"
    assert text_language("好的。现在。输出。") == "zh" and text_language("Now. OK.") == "en"


# --------------------------------------------------------------------------- continuations


def test_anthropic_continuation_from_a_real_dsh_request() -> None:
    original = agent_requests("e_tool_error_two_turns")[-1]["body"]
    body = build_continuation(
        AnthropicWire(), original, KeptWork("I should read it again.", "The file"), LOOP, "en"
    )
    assert "dsh_session_log" not in body and "dsh_plugin_packages" not in body
    assert "dsh_session_log" in original  # the original is not modified
    for key in ("model", "stream", "max_tokens", "thinking", "output_config", "system", "tools"):
        assert body[key] == original[key]
    assert body["messages"][: len(original["messages"])] == original["messages"]
    assistant, user = body["messages"][-2:]
    assert assistant == {"role": "assistant", "content": [{"type": "text", "text": "The file"}]}
    correction = user["content"][0]["text"]
    assert user["role"] == "user" and "I should read it again." in correction
    assert "Now. OK." not in correction  # nothing of the loop goes back upstream
    # DSH's request has tools: earlier tool calls may have run
    assert "check the current state of the workspace" in correction


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_continuation_without_tools_says_nothing_of_them(lang: str) -> None:
    workspace = {"en": "workspace", "zh": "工作区"}[lang]
    original = {"model": "m", "messages": [{"role": "user", "content": "List 50 fruits."}]}
    body = build_continuation(OpenAIWire(), original, KeptWork("", "1. Apple"), LOOP, lang)
    assert workspace not in body["messages"][-1]["content"]
    with_tools = {**original, "tools": [{"type": "function", "function": {"name": "ls"}}]}
    body = build_continuation(OpenAIWire(), with_tools, KeptWork("", "1. Apple"), LOOP, lang)
    assert workspace in body["messages"][-1]["content"]


def test_anthropic_continuation_without_kept_text_extends_the_last_user_turn() -> None:
    original = agent_requests("a_reasoning_loop")[0]["body"]
    body = build_continuation(AnthropicWire(), original, KeptWork("Plan.", ""), LOOP, "en")
    assert len(body["messages"]) == len(original["messages"])
    last_before, last_after = original["messages"][-1], body["messages"][-1]
    assert last_after["content"][:-1] == last_before["content"]
    assert "without repeating" in last_after["content"][-1]["text"]


def test_openai_continuation_keeps_reasoning_content_convention() -> None:
    original = agent_requests("j_openai_compat_provider")[-1]["body"]
    body = build_continuation(
        OpenAIWire(original), original, KeptWork("Think.", "Partial"), LOOP, "zh"
    )
    assistant, user = body["messages"][-2:]
    assert assistant == {"role": "assistant", "content": "Partial", "reasoning_content": "Think."}
    assert user["role"] == "user" and "不要重复" in user["content"]
    assert body["stream_options"] == original["stream_options"]


def test_retry_overrides_per_protocol() -> None:
    config = load_config(
        None,
        {
            "retryTemperature": 0.4,
            "retryReasoningEffort": "max",
            "retryFrequencyPenalty": 0.5,
            "retryPresencePenalty": 0.25,
        },
    )
    native = agent_requests("a_reasoning_loop")[0]["body"]
    tweaked = AnthropicWire().with_retry_overrides(native, config)
    assert tweaked["temperature"] == 0.4 and tweaked["output_config"] == {"effort": "max"}
    assert "frequency_penalty" not in tweaked  # Anthropic Messages has no penalties
    title = recorded("a_reasoning_loop")[1]["body"]  # thinking disabled: effort not forced
    assert "output_config" not in AnthropicWire().with_retry_overrides(title, config)
    compat = agent_requests("j_openai_compat_provider")[0]["body"]
    tweaked = OpenAIWire().with_retry_overrides(compat, config)
    assert tweaked["reasoning_effort"] == "max" and tweaked["frequency_penalty"] == 0.5
    assert tweaked["presence_penalty"] == 0.25
    unset = {"retryTemperature": NULL, "retryFrequencyPenalty": NULL, "retryPresencePenalty": NULL}
    untouched = OpenAIWire().with_retry_overrides(compat, load_config(None, unset))
    assert untouched == compat


def test_output_budget_per_protocol() -> None:
    native = {"model": "m", "max_tokens": 900, "messages": []}
    assert AnthropicWire().output_budget(native) == 900
    assert AnthropicWire().with_output_budget(native, 300)["max_tokens"] == 300
    assert native["max_tokens"] == 900  # the body is not changed in place
    newer = {"model": "m", "max_completion_tokens": 800, "max_tokens": 900, "messages": []}
    assert OpenAIWire().output_budget(newer) == 800
    assert OpenAIWire().with_output_budget(newer, 10) == {**newer, "max_completion_tokens": 10}
    assert OpenAIWire().output_budget({"model": "m", "max_tokens": "9"}) is None  # not a count
    unlimited = {"model": "m", "messages": []}
    assert OpenAIWire().output_budget(unlimited) is None
    assert OpenAIWire().with_output_budget(unlimited, 10) == unlimited


def test_stall_nudge_goes_after_tool_results() -> None:
    native = agent_requests("d_tool_loop")[3]["body"]
    nudged = AnthropicWire().with_user_text(native, stall_nudge("en"))
    last = nudged["messages"][-1]
    assert last["role"] == "user" and last["content"][-1]["text"].startswith("[looprescue]")
    assert last["content"][:-1] == native["messages"][-1]["content"]
    compat = agent_requests("j_openai_compat_provider")[0]["body"]
    nudged = OpenAIWire().with_user_text(compat, stall_nudge("zh"))
    assert nudged["messages"][:-1] == compat["messages"]
    assert set(nudged["messages"][-1]) == {"role", "content"}
    assert nudged["messages"][-1]["role"] == "user"
    assert "调用" in nudged["messages"][-1]["content"]


def test_markers_are_one_line_and_localized() -> None:
    assert marker("reasoning", 2900, "en") == "〔2900 chars of repeated reasoning removed〕"
    assert marker("text", 12, "zh") == "〔已删除 12 个字符的重复文本〕"
    assert shorten("a\n\nb   c") == "a b c"
    assert len(shorten("x" * 500, 50)) == 50
