"""Conversation state shared between proxy instances through a real redis-server, and what
happens when Redis is not there; ``looprescue proxy --workers N``."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest
from tests.support.redis_server import redis_server
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream, corpus_response
from tests.test_proxy_faults import reasoning_loop
from tests.test_proxy_http import ProxyServer

from looprescue.config import load_config
from looprescue.proxy.state import RedisStates

CAP = 2


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


def looping_turn(base_url: str, session: str) -> str:
    """One streamed turn of conversation ``session``; returns the visible text."""
    client = anthropic.Anthropic(
        base_url=base_url,
        api_key="k",
        max_retries=0,
        default_headers={"x-looprescue-session": session},
    )
    with client.messages.stream(
        model="deepseek-flash", max_tokens=4096, messages=[{"role": "user", "content": "go"}]
    ) as stream:
        final = stream.get_final_message()
    return "".join(b.text for b in final.content if b.type == "text")


def script_loops(upstream: ScriptedUpstream, turns: int) -> None:
    """Every turn loops; every continuation answers."""
    record = reasoning_loop()
    for _ in range(turns):
        upstream.enqueue(corpus_response(record), ScriptedResponse(text="Resumed."))


def test_two_instances_share_the_rescue_cap_through_redis(redis_url: str) -> None:
    config = load_config(None, {"maxConsecutiveRescues": CAP})
    with ScriptedUpstream() as upstream:
        script_loops(upstream, CAP + 1)
        stores = [RedisStates(redis_url, 64), RedisStates(redis_url, 64)]
        with (
            ProxyServer(config, upstream.base_url, store=stores[0]) as first,
            ProxyServer(config, upstream.base_url, store=stores[1]) as second,
        ):
            proxies = [first, second, first]  # the conversation alternates between them
            texts = [looping_turn(p.base_url, "shared-conversation") for p in proxies]
            agent = len(upstream.agent_requests())
            other = looping_turn(second.base_url, "another-conversation")
    assert texts[0].endswith("Resumed.") and texts[1].endswith("Resumed.")
    # the third looping turn is past the cap: cut with the note, no continuation
    assert "automatic resumes in a row" in texts[2] and not texts[2].endswith("Resumed.")
    assert agent == 2 * CAP + 1
    assert other.endswith("Resumed.")  # each conversation has its own count


def test_unreachable_redis_serves_on_local_state_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"redis://127.0.0.1:{probe.getsockname()[1]}/0"
    config = load_config(None, {"maxConsecutiveRescues": 1})
    caplog.set_level(logging.WARNING, logger="looprescue.proxy")
    with ScriptedUpstream() as upstream:
        script_loops(upstream, 2)
        with ProxyServer(config, upstream.base_url, store=RedisStates(dead, 64)) as proxy:
            texts = [looping_turn(proxy.base_url, "local-only") for _ in range(2)]
    assert texts[0].endswith("Resumed.")
    assert "automatic resumes in a row" in texts[1]  # the cap still holds, on local state
    warnings = [r.getMessage() for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(warnings) == 1 and dead in warnings[0]


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def test_workers_share_one_port_and_redis_state(redis_url: str, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with ScriptedUpstream() as upstream:
        script_loops(upstream, CAP + 1)
        command = [
            sys.executable,
            "-c",
            "from looprescue.cli import main; main()",
            "proxy",
            "--upstream",
            upstream.base_url,
            "--port",
            str(port),
            "--workers",
            "2",
            "--state",
            redis_url,
            "--set",
            f"maxConsecutiveRescues={CAP}",
        ]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 30
            while len(_children(process.pid)) < 2 or not _listening(port):
                assert process.poll() is None, process.stderr.read().decode()
                assert time.monotonic() < deadline, "workers did not start"
                time.sleep(0.05)
            workers = _children(process.pid)
            base = f"http://127.0.0.1:{port}"
            texts = [looping_turn(base, "workers-conversation") for _ in range(CAP + 1)]
        finally:
            process.terminate()
            _, stderr = process.communicate(timeout=30)
    assert len(workers) == 2 and process.returncode == 0, stderr.decode()
    assert all(t.endswith("Resumed.") for t in texts[:CAP])
    assert "automatic resumes in a row" in texts[CAP]
    assert "2 worker(s)" in stderr.decode()


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False
