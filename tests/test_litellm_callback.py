"""The LiteLLM callback inside the real LiteLLM proxy (``litellm --config …`` on 127.0.0.1, a
subprocess), in front of the scripted upstream, with a real ``openai`` client talking to it: a
loop is cut and resumed, streamed and whole, and a loop in the history is cut out on the way in.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml
from tests.support.scripted_upstream import (
    ScriptedResponse,
    ScriptedUpstream,
    corpus_response,
    load_corpus,
)

from looprescue.config import LoopRescueConfig
from looprescue.pruning import cut_text, first_hit

STARTUP_SECONDS = 240
MASTER_KEY = "sk-looprescue-test-master-key-0123456789"
CONTINUATION = ScriptedResponse(reasoning="Resuming without repeating.", text="Final answer.")
CONFIG = LoopRescueConfig()


def loop_record(channel: str) -> dict[str, Any]:
    for record in load_corpus():
        if record["label"] == "loop" and record["channel"] == channel:
            hit = first_hit(record["text"], channel, CONFIG)
            if hit is not None and 0 < hit.prune_offset < len(record["text"]) - 200:
                return record
    raise AssertionError(f"no {channel} loop in the corpus is found by the detector")


REASONING_LOOP = loop_record("reasoning")
TEXT_LOOP = loop_record("text")


def kept(record: dict[str, Any]) -> str:
    hit = first_hit(record["text"], record["channel"], CONFIG)
    assert hit is not None
    return record["text"][: hit.prune_offset]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiteLLMProxy:
    """``litellm --config`` with the looprescue callback, in front of ``upstream``."""

    def __init__(self, upstream: ScriptedUpstream, workdir: Path) -> None:
        self.port = free_port()
        config = {
            "model_list": [
                {
                    "model_name": "deepseek-chat",
                    "litellm_params": {
                        "model": "openai/deepseek-chat",
                        "api_base": upstream.base_url + "/v1",
                        "api_key": "upstream-key",
                    },
                }
            ],
            "litellm_settings": {"callbacks": "looprescue.integrations.litellm.rescue"},
        }
        path = workdir / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        env = {
            **os.environ,
            "LITELLM_MASTER_KEY": MASTER_KEY,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the price list
            "LITELLM_LOG": "ERROR",
        }
        self.log = (workdir / "litellm.log").open("wb")
        litellm = Path(sys.executable).parent / "litellm"
        self.process = subprocess.Popen(
            [str(litellm), "--config", str(path), "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=workdir,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.logfile = workdir / "litellm.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"litellm exited: {self.logfile.read_text()[-3000:]}")
            try:
                if httpx.get(self.base_url + "/health/liveliness", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise AssertionError(f"litellm did not start: {self.logfile.read_text()[-3000:]}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.log.close()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiteLLMProxy, Any]]:
    with ScriptedUpstream() as upstream:
        proxy = LiteLLMProxy(upstream, tmp_path_factory.mktemp("litellm"))
        try:
            proxy.wait()
            yield proxy, upstream
        finally:
            proxy.stop()


@pytest.fixture
def setup(gateway: tuple[LiteLLMProxy, ScriptedUpstream]) -> tuple[openai.OpenAI, Any]:
    proxy, upstream = gateway
    upstream.clear_requests()
    client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key=MASTER_KEY, max_retries=0)
    return client, upstream


def agent_requests(upstream: ScriptedUpstream) -> list[Any]:
    return [r for r in upstream.agent_requests() if r.path.endswith("/chat/completions")]


def test_a_streamed_loop_is_cut_and_resumed(setup: tuple[openai.OpenAI, Any]) -> None:
    client, upstream = setup
    upstream.enqueue(corpus_response(REASONING_LOOP), CONTINUATION)
    stream = client.chat.completions.create(
        model="deepseek-chat", messages=[{"role": "user", "content": "Go."}], stream=True
    )
    reasoning, text = [], []
    for chunk in stream:
        for choice in chunk.choices:
            reasoning.append((choice.delta.model_extra or {}).get("reasoning_content") or "")
            text.append(choice.delta.content or "")
    got = "".join(reasoning)
    assert got.startswith(kept(REASONING_LOOP))
    after = got[len(kept(REASONING_LOOP)) :].lstrip("\n")
    assert after.startswith("〔") and after.endswith(CONTINUATION.reasoning), after[:120]
    assert "".join(text) == CONTINUATION.text
    first, continuation = agent_requests(upstream)
    assert "[looprescue]" in continuation.text() and "[looprescue]" not in first.text()


def test_a_whole_loop_is_cut_and_resumed(setup: tuple[openai.OpenAI, Any]) -> None:
    client, upstream = setup
    upstream.enqueue(corpus_response(TEXT_LOOP), CONTINUATION)
    completion = client.chat.completions.create(
        model="deepseek-chat", messages=[{"role": "user", "content": "Go."}]
    )
    text = completion.choices[0].message.content or ""
    assert text.startswith(kept(TEXT_LOOP)) and text.endswith(CONTINUATION.text)
    assert "〔" in text and TEXT_LOOP["text"][len(kept(TEXT_LOOP)) :][:200] not in text
    assert len(agent_requests(upstream)) == 2


def test_the_history_is_sanitized_on_the_way_in(setup: tuple[openai.OpenAI, Any]) -> None:
    client, upstream = setup
    upstream.enqueue(ScriptedResponse(text="Done."))
    history = [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": TEXT_LOOP["text"]},
        {"role": "user", "content": "Go on."},
    ]
    stream = client.chat.completions.create(model="deepseek-chat", messages=history, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Done."
    (request,) = agent_requests(upstream)
    hit = first_hit(TEXT_LOOP["text"], "text", CONFIG)
    assert hit is not None
    cut = cut_text(TEXT_LOOP["text"], hit.prune_offset, "text")
    assert cut is not None
    assert request.body["messages"][1]["content"] == cut.text
    assert request.body["messages"][2] == history[2]
