"""``looprescue proxy``: flags override YAML, bad config fails loudly naming the key."""

from __future__ import annotations

import gc
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream, parse_sse
from typer.testing import CliRunner

from looprescue.cli import app
from looprescue.commands.proxy import resolve_config, settle_garbage_collector
from looprescue.config import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "looprescue.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_flags_override_the_yaml(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "mode: cut\nmarker: false\nproxy:\n  upstream: http://127.0.0.1:1\n  port: 9000\n",
    )
    cfg = resolve_config(path, "http://127.0.0.1:2", None, 9100, "observe", tmp_path / "a.jsonl")
    assert cfg.mode == "observe" and cfg.marker is False
    assert cfg.proxy.upstream == "http://127.0.0.1:2" and cfg.proxy.port == 9100
    assert cfg.proxy.host == "127.0.0.1" and cfg.proxy.auditLog == str(tmp_path / "a.jsonl")
    kept = resolve_config(path, None, None, None, None, None)
    assert kept.mode == "cut" and kept.proxy.port == 9000


def test_missing_upstream_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"proxy\.upstream: required"):
        resolve_config(None, None, None, None, None, None)


@pytest.mark.parametrize(
    ("yaml_text", "named"),
    [
        ("mode: rescue\nmaxConsecutiveRescue: 2\n", "maxConsecutiveRescue: unknown key"),
        ("proxy:\n  port: 70000\n", "proxy.port"),
        ("detector:\n  cycleMinRepeats: 1\n", "detector.cycleMinRepeats"),
    ],
)
def test_bad_config_exits_2_naming_the_key(tmp_path: Path, yaml_text: str, named: str) -> None:
    path = write(tmp_path, yaml_text)
    result = CliRunner().invoke(
        app, ["proxy", "--upstream", "http://127.0.0.1:1", "--config", str(path)]
    )
    assert result.exit_code == 2
    assert named in result.output.replace("\n", " ") or named in (result.stderr or "")


def test_bad_upstream_url_exits_2() -> None:
    result = CliRunner().invoke(app, ["proxy", "--upstream", "ftp://example"])
    assert result.exit_code == 2
    assert "upstream URL must be http(s)" in (result.output + (result.stderr or ""))


def test_proxy_command_serves_requests(tmp_path: Path) -> None:
    """The real command in its own process, in front of the scripted upstream."""

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = write(tmp_path, "marker: true\nproxy:\n  host: 127.0.0.1\n")
    with ScriptedUpstream([ScriptedResponse(text="Served.")]) as upstream:
        command = [
            sys.executable,
            "-c",
            "from looprescue.cli import main; main()",
            "proxy",
            "--upstream",
            upstream.base_url,
            "--config",
            str(config),
            "--port",
            str(port),
        ]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                        break
                except OSError:
                    assert process.poll() is None, process.stderr.read().decode()
                    assert time.monotonic() < deadline, "proxy did not start listening"
                    time.sleep(0.05)
            response = httpx.post(
                f"http://127.0.0.1:{port}/v1/messages",
                json={
                    "model": "deepseek-flash",
                    "stream": True,
                    "max_tokens": 10,
                    "messages": [{"role": "user", "content": "hi"}],
                },
                headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
            )
        finally:
            process.terminate()
            _, stderr = process.communicate(timeout=30)
    assert response.status_code == 200
    text = "".join(
        data["delta"]["text"]
        for name, data in parse_sse(response.text)
        if name == "content_block_delta" and data["delta"]["type"] == "text_delta"
    )
    assert text == "Served."
    assert f"looprescue proxy on http://127.0.0.1:{port}" in stderr.decode()


def test_the_proxy_process_keeps_its_start_out_of_the_collectors_way() -> None:
    """Before serving, the heap built while starting is frozen; the thresholds stay CPython's
    (spaced-out young collections let the soak's RSS grow)."""
    threshold = gc.get_threshold()
    try:
        settle_garbage_collector()
        assert gc.get_freeze_count() > 1000  # modules, config, the app
        assert gc.get_threshold() == threshold
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
