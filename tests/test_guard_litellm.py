"""The tool-loop guard inside the real LiteLLM proxy (the looprescue callback, a subprocess on
127.0.0.1) with a real ``openai`` client as the agent: steered, then stopped with LiteLLM
answering the guard's message itself, streamed and whole."""

from __future__ import annotations

import openai
import pytest
from tests.support.scripted_upstream import ScriptedUpstream
from tests.test_guard_http import (
    assert_steered_then_stopped,
    looping_model,
    openai_agent,
    responses_agent,
)
from tests.test_litellm_callback import gateway, setup

__all__ = ["gateway", "setup"]  # the LiteLLM proxy fixtures


# A streamed Responses call the guard stops is not here: LiteLLM answers the guard's mock
# whole where a stream was asked, and its own stream wrappers fail on it (README, Limitations).
CASES = [("chat", False), ("chat", True), ("responses", False)]


@pytest.mark.parametrize(("api", "stream"), CASES, ids=[f"{a}-{s}" for a, s in CASES])
def test_a_tool_loop_through_litellm_is_steered_then_stopped(
    setup: tuple[openai.OpenAI, ScriptedUpstream], stream: bool, api: str
) -> None:
    client, upstream = setup
    looping_model(upstream, answers=6)  # the repeats and the steered request, no more
    agent = openai_agent if api == "chat" else responses_agent
    text, outcomes = agent(client, stream, model="deepseek-chat")
    # LiteLLM's own response carries no looprescue header
    assert outcomes == [None] * 7
    assert_steered_then_stopped(upstream, text, outcomes, repeats=5, headers=False)
