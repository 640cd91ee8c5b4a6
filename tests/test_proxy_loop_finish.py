"""An inference engine that stops a looping answer itself (vLLM's ``finish_reason:
"repetition"``, others' ``"loop"``): the proxy treats the finish as a detected loop, prunes
the answer at a sentence end (or where the detector's suspicion begins) and resumes. Real HTTP
on 127.0.0.1, the real openai SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream
from tests.test_proxy_http import CONTINUATION, ProxyServer

from looprescue.config import load_config

MODEL = "deepseek-chat"
PROMPT = [{"role": "user", "content": "Check the config."}]
# what the engine sent before it gave up: a sentence, then the start of one it kept repeating
LOOPING = "The config has three layers. I will check the loader again and"


@pytest.fixture
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as up:
        yield up


def chunk(delta: dict, finish: str | None = None) -> bytes:
    data = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    data["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return f"data: {json.dumps(data)}\n\n".encode()


def looping_stream(word: str) -> list[bytes]:
    pieces = [LOOPING[i : i + 7] for i in range(0, len(LOOPING), 7)]
    return [
        chunk({"role": "assistant", "content": ""}),
        *[chunk({"content": piece}) for piece in pieces],
        chunk({}, word),
        b"data: [DONE]\n\n",
    ]


@pytest.mark.parametrize("word", ["repetition", "loop"])
def test_a_streamed_loop_finish_is_resumed(upstream: ScriptedUpstream, word: str) -> None:
    upstream.enqueue(ScriptedResponse(raw_frames=looping_stream(word)), CONTINUATION)
    with ProxyServer(load_config(None), upstream.base_url) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="k", max_retries=0)
        stream = client.chat.completions.create(model=MODEL, messages=PROMPT, stream=True)
        text, finishes = "", []
        for piece in stream:
            for choice in piece.choices:
                text += choice.delta.content or ""
                if choice.finish_reason:
                    finishes.append(choice.finish_reason)
    assert len(upstream.agent_requests()) == 2
    assert finishes == ["stop"]  # the looping attempt's finish never reaches the client
    assert text.endswith(CONTINUATION.text)
    # what was not yet sent of the unfinished sentence is pruned; the continuation carries
    # what the client has, no more
    continuation = upstream.agent_requests()[1].body["messages"]
    kept = next(m["content"] for m in continuation if m["role"] == "assistant")
    assert LOOPING.startswith(kept) and text.startswith(kept)


def test_a_whole_answer_with_a_loop_finish_is_resumed(upstream: ScriptedUpstream) -> None:
    looping = {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": LOOPING},
                "finish_reason": "repetition",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1378, "total_tokens": 1388},
    }
    upstream.enqueue(ScriptedResponse(raw_body=json.dumps(looping).encode()), CONTINUATION)
    with ProxyServer(load_config(None), upstream.base_url) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="k", max_retries=0)
        answer = client.chat.completions.create(model=MODEL, messages=PROMPT)
    assert len(upstream.agent_requests()) == 2
    choice = answer.choices[0]
    assert choice.finish_reason == "stop"
    content = choice.message.content or ""
    # a whole answer's text is judged at once, and what the detector clears is kept: the
    # prune point moves no further back than that
    assert content.startswith("The config has three layers.")
    assert content.endswith(CONTINUATION.text)
    # the usage adds up both attempts: the looping one's 1378 output tokens included
    assert answer.usage is not None and answer.usage.completion_tokens >= 1378
