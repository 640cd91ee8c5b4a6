"""looprescue where POSIX extras are missing, as on Windows: no ``fcntl``, no ``fork``, no event
loop signal handlers (and no uvloop). Each command runs in a child interpreter whose
``sitecustomize`` hides them; only an edit that needs DSH's lock degrades, and says so."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from tests.test_dsh_helpers import install_session

HIDE = """
import os, sys
sys.modules["fcntl"] = None  # "import fcntl" raises ImportError, as on Windows
sys.modules["uvloop"] = None
if hasattr(os, "fork"):
    del os.fork
from asyncio import unix_events

def _no_loop_signals(self, *args, **kwargs):
    raise NotImplementedError

unix_events._UnixSelectorEventLoop.add_signal_handler = _no_loop_signals
unix_events._UnixSelectorEventLoop.remove_signal_handler = _no_loop_signals
"""


@pytest.fixture
def hidden_env(tmp_path: Path) -> dict[str, str]:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(HIDE)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shim), env.get("PYTHONPATH")]))
    return env


def run(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "looprescue", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_shim_hides_what_it_claims(hidden_env):
    probe = (
        "import os, asyncio\n"
        "try:\n    import fcntl\nexcept ImportError:\n    print('no fcntl')\n"
        "print('fork' if hasattr(os, 'fork') else 'no fork')\n"
        "loop = asyncio.new_event_loop()\n"
        "try:\n    loop.add_signal_handler(2, print)\n"
        "except NotImplementedError:\n    print('no loop signals')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=hidden_env, capture_output=True, text=True
    ).stdout.split()
    assert out == ["no", "fcntl", "no", "fork", "no", "loop", "signals"]


def test_scan_doctor_and_report_run(hidden_env, tmp_path):
    log = install_session(tmp_path / "data", "a_reasoning_loop")
    scan = run(hidden_env, "scan", str(log.parent), "--json")
    assert scan.returncode == 1, scan.stderr  # the fixture's reasoning loop is found
    assert any(json.loads(line)["channel"] == "reasoning" for line in scan.stdout.splitlines())
    doctor = run(hidden_env, "doctor", str(log.parent))
    assert doctor.returncode in (0, 1), doctor.stderr
    page = tmp_path / "report.html"
    report = run(hidden_env, "report", str(log.parent), "-o", str(page))
    assert report.returncode == 0, report.stderr
    assert "<html" in page.read_text()


def test_an_edit_refuses_without_a_lock_and_says_why(hidden_env, tmp_path):
    log = install_session(tmp_path / "data", "a_reasoning_loop")
    before = log.read_bytes()
    refused = run(hidden_env, "clean", str(log.parent))
    assert refused.returncode == 2
    assert "cannot lock files" in refused.stderr and "--force" in refused.stderr
    assert log.read_bytes() == before  # nothing written
    forced = run(hidden_env, "clean", "--force", "--yes", str(log.parent))
    assert forced.returncode == 0, forced.stderr
    assert "without DSH's lock" in forced.stderr
    assert log.read_bytes() != before


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_proxy_serves_and_stops(hidden_env):
    port = _free_port()
    args = ["proxy", "--upstream", "http://127.0.0.1:9", "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "looprescue", *args],
        env=hidden_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, "the proxy did not start"
                time.sleep(0.2)
        proc.terminate()  # SIGTERM reaches the server through a plain signal handler
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_workers_need_fork_and_say_so(hidden_env):
    result = run(hidden_env, "proxy", "--upstream", "http://127.0.0.1:9", "--workers", "2")
    assert result.returncode == 2
    assert "proxy.workers" in result.stderr and "fork" in result.stderr
