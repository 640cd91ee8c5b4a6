"""Running the proxy as a service: its log lines (one per detection, cut and resume, as text or
JSON, never wrapped), the audit log across rotation, configuration from the environment and
from discovered files (``looprescue config show``), ``--version``, and ``/metrics`` that sums
every worker's counts."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream, corpus_response
from tests.test_proxy_faults import reasoning_loop
from tests.test_proxy_http import CONTINUATION, ProxyServer
from tests.test_proxy_server import NativeProxy
from typer.testing import CliRunner

from looprescue import __version__
from looprescue.cli import app
from looprescue.config import load_config
from looprescue.logsetup import configure, reset
from looprescue.proxy.audit import AuditLog
from looprescue.proxy.server import Limits


def test_each_detection_cut_and_resume_is_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="looprescue.events")
    with ScriptedUpstream() as upstream:
        upstream.enqueue(corpus_response(reasoning_loop()), CONTINUATION)
        with ProxyServer(load_config(None), upstream.base_url) as proxy:  # no audit log
            body = {
                "model": "deepseek-flash",
                "stream": True,
                "max_tokens": 4096,
                "messages": [{"role": "user", "content": "Explain the loader."}],
            }
            headers = {"x-api-key": "k", "x-looprescue-session": "s-42"}
            answer = httpx.post(proxy.base_url + "/v1/messages", json=body, headers=headers)
    assert answer.status_code == 200 and CONTINUATION.text in answer.text
    lines = [r for r in caplog.records if r.name == "looprescue.events"]
    kinds = [r.event for r in lines]  # type: ignore[attr-defined]
    assert kinds[:3] == ["detection", "cut", "resume"]
    detection = lines[0].getMessage()
    assert detection.startswith("detection rule=") and " chars_pruned=" in detection
    assert "x-looprescue-session:s-42 " in detection and "\n" not in detection
    assert reasoning_loop()["text"][-40:] not in detection  # no loop text in a log line


def test_json_log_lines_carry_the_events_fields(capsys: pytest.CaptureFixture[str]) -> None:
    configure("info", "json")
    try:
        audit = AuditLog(None)
        audit.write("cut", {"rule": "cycle", "loop_text": "x" * 50}, {"conversation": "c1"})
        logging.getLogger("looprescue.proxy").debug("not shown at info")
    finally:
        reset()
    (line,) = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert record["event"] == "cut" and record["rule"] == "cycle"
    assert record["conversation"] == "c1" and record["level"] == "info"
    assert "loop_text" not in record and record["time"].endswith("Z")


def test_the_audit_log_starts_a_new_file_when_rotated(tmp_path: Path) -> None:
    path = tmp_path / "audit" / "a.jsonl"
    audit = AuditLog(path)
    audit.write("detection", {"rule": "cycle"}, {})
    path.rename(tmp_path / "audit" / "a.jsonl.1")  # logrotate's move
    audit.write("cut", {"rule": "cycle"}, {})
    path.unlink()  # deleted outright
    audit.write("resume", {"attempt": 2}, {})
    audit.close()
    rotated = (tmp_path / "audit" / "a.jsonl.1").read_text().splitlines()
    assert [json.loads(line)["kind"] for line in rotated] == ["detection"]
    assert [json.loads(line)["kind"] for line in path.read_text().splitlines()] == ["resume"]
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output == f"looprescue {__version__}\n"


def test_config_show_names_each_values_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    xdg = tmp_path / "xdg"
    (xdg / "looprescue").mkdir(parents=True)
    (xdg / "looprescue" / "config.yml").write_text("proxy:\n  port: 9100\n  workers: 2\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("LOOPRESCUE_")]:
        monkeypatch.delenv(name)
    runner = CliRunner()

    def show(*args: str, env: dict[str, str] | None = None) -> dict[str, tuple[object, str]]:
        result = runner.invoke(app, ["config", "show", "--json", *args], env=env)
        assert result.exit_code == 0, result.output
        rows = [json.loads(line) for line in result.output.splitlines()]
        return {row["key"]: (row["value"], row["source"]) for row in rows}

    found = show()
    user_file = str(xdg / "looprescue" / "config.yml")
    assert found["proxy.port"] == (9100, user_file) and found["mode"] == ("rescue", "default")
    # ./looprescue.yml comes before the user's file; the environment and --set on top
    Path("looprescue.yml").write_text("proxy:\n  port: 9200\n")
    found = show("--set", "detector.poolWindow=40", env={"LOOPRESCUE_LOG_LEVEL": "debug"})
    assert found["proxy.port"] == (9200, "looprescue.yml")
    assert found["proxy.workers"] == (1, "default")  # the user's file is not read then
    assert found["detector.poolWindow"] == (40, "--set")
    assert found["proxy.logLevel"] == ("debug", "env LOOPRESCUE_LOG_LEVEL")
    explicit = tmp_path / "explicit.yml"
    explicit.write_text("mode: observe\n")
    found = show(env={"LOOPRESCUE_CONFIG": str(explicit)})
    assert found["mode"] == ("observe", str(explicit)) and found["proxy.port"][0] == 8787
    bad = runner.invoke(app, ["config", "show"], env={"LOOPRESCUE_PORT": "many"})
    assert bad.exit_code == 2 and "proxy.port" in bad.output


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def metric_total(text: str, name: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    )


def test_workers_share_metrics_and_settings_come_from_the_environment(tmp_path: Path) -> None:
    """Two workers, every setting from LOOPRESCUE_* variables; each scrape of /metrics,
    whichever worker answers it, counts every worker's responses. The start-up line stays
    one line though stderr is no terminal."""
    port = free_port()
    streams = 8
    with ScriptedUpstream() as upstream:
        for _ in range(streams):
            upstream.enqueue(ScriptedResponse(text="Served."))
        env = {
            **os.environ,
            "LOOPRESCUE_UPSTREAM": upstream.base_url + "/" + "a-long-base-path" * 4,
            "LOOPRESCUE_PORT": str(port),
            "LOOPRESCUE_WORKERS": "2",
            "LOOPRESCUE_LOG_FORMAT": "json",
            "COLUMNS": "80",
        }
        command = [sys.executable, "-m", "looprescue", "proxy"]
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, cwd=tmp_path)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    assert process.poll() is None and time.monotonic() < deadline
                    time.sleep(0.05)
            body = {
                "model": "m",
                "stream": True,
                "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}],
            }
            for _ in range(streams):  # a new connection each: the kernel spreads them
                with httpx.Client() as client:
                    response = client.post(f"http://127.0.0.1:{port}/v1/messages", json=body)
                    assert response.status_code == 200
            totals = set()
            for _ in range(6):
                with httpx.Client() as client:
                    scrape = client.get(f"http://127.0.0.1:{port}/metrics").text
                totals.add(metric_total(scrape, "looprescue_responses_total"))
        finally:
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=30)
    assert totals == {streams}
    lines = stderr.decode().splitlines()
    start = json.loads(lines[0])
    assert start["message"].startswith(f"looprescue proxy on http://127.0.0.1:{port} -> ")
    assert len(lines[0]) > 80  # not wrapped at the terminal's width


def test_text_log_lines_are_never_wrapped() -> None:
    stream = io.StringIO()
    configure("info", "text")
    handler = logging.getLogger("looprescue").handlers[0]
    handler.setStream(stream)  # type: ignore[attr-defined]
    try:
        logging.getLogger("looprescue.proxy").info("x" * 200)
    finally:
        reset()
    (line,) = stream.getvalue().splitlines()
    assert line.endswith("x" * 200) and " INFO looprescue.proxy: " in line


def test_the_access_log_has_one_line_per_request(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="looprescue.access")
    with ScriptedUpstream() as upstream:
        limits = Limits(access_log=True, keepalive=1.0, graceful=1.0)
        with NativeProxy(upstream.base_url, limits=limits) as proxy:
            models = httpx.get(proxy.base_url + "/v1/models?x=" + "q" * 300)
            health = httpx.get(proxy.base_url + "/healthz")
    assert models.status_code == 200 and health.status_code == 200
    lines = [r for r in caplog.records if r.name == "looprescue.access"]
    assert len(lines) == 2
    first, second = (r.getMessage() for r in lines)
    assert '"GET /v1/models?x=qqq' in first and first.endswith(" complete")
    assert "…" in first and len(first) < 250  # the target cut short
    assert '"GET /healthz" 200 ' in second
    assert lines[0].fields["status"] == 200  # type: ignore[attr-defined]
