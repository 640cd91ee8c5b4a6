"""The real LiteLLM proxy (``litellm --config …`` on 127.0.0.1, a subprocess) in front of the
scripted upstream, with whatever looprescue hook a test puts in its config."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from tests.support.scripted_upstream import ScriptedUpstream

STARTUP_SECONDS = 240
MASTER_KEY = "sk-looprescue-test-master-key-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def model_list(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    """``deepseek-chat`` on the OpenAI route and ``claude-scripted`` on the Anthropic one."""
    return [
        {
            "model_name": "deepseek-chat",
            "litellm_params": {
                "model": "openai/deepseek-chat",
                "api_base": upstream.base_url + "/v1",
                "api_key": "upstream-key",
            },
        },
        {
            "model_name": "claude-scripted",
            "litellm_params": {
                "model": "anthropic/claude-scripted",
                "api_base": upstream.base_url,
                "api_key": "upstream-key",
            },
        },
    ]


class LiteLLMProxy:
    """``litellm --config`` with ``settings`` (config.yaml keys besides the model list)."""

    def __init__(self, upstream: ScriptedUpstream, workdir: Path, settings: dict[str, Any]) -> None:
        self.port = free_port()
        path = workdir / "config.yaml"
        path.write_text(yaml.safe_dump({"model_list": model_list(upstream), **settings}))
        env = {
            **os.environ,
            "LITELLM_MASTER_KEY": MASTER_KEY,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the price list
            "LITELLM_LOG": "ERROR",
        }
        self.logfile = workdir / "litellm.log"
        self.log = self.logfile.open("wb")
        litellm = Path(sys.executable).parent / "litellm"
        self.process = subprocess.Popen(
            [str(litellm), "--config", str(path), "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=workdir,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

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
