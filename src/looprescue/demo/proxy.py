"""The real ``looprescue proxy``, run as a child process in front of the demo model.

It listens on a free loopback port and writes its audit log into the demo's temp dir; the
demo reads its detections, cuts and resumes from there, as a user reviewing a proxy would.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

START_SECONDS = 30


class ProxyError(RuntimeError):
    """The proxy did not come up; the message holds what it printed."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class ProxyProcess:
    """``with ProxyProcess(upstream, workdir) as proxy:`` serves on ``proxy.base_url``."""

    def __init__(self, upstream: str, workdir: Path) -> None:
        self.upstream = upstream
        self.audit_path = workdir / "audit.jsonl"
        self._log_path = workdir / "proxy.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._audit_offset = 0
        self._records: list[dict[str, Any]] = []
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def arguments(self) -> list[str]:
        return [
            "proxy",
            "--upstream",
            self.upstream,
            "--port",
            str(self.port),
            "--audit-log",
            str(self.audit_path),
        ]

    def __enter__(self) -> ProxyProcess:
        # A free port can be taken between the probe and the bind: try a few.
        for _ in range(3):
            self.port = _free_port()
            with self._log_path.open("wb") as log:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "looprescue", *self.arguments()],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            if self._wait_ready():
                return self
        self.__exit__()
        printed = self._log_path.read_text(encoding="utf-8", errors="replace").strip()
        raise ProxyError(f"looprescue proxy did not start: {printed[-800:] or 'no output'}")

    def _wait_ready(self) -> bool:
        assert self._process is not None
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            if _accepts(self.port):
                return True
            time.sleep(0.05)
        return False

    def __exit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def audit_records(self) -> list[dict[str, Any]]:
        """Every complete audit record written so far, oldest first."""
        with contextlib.suppress(FileNotFoundError), self.audit_path.open("rb") as handle:
            handle.seek(self._audit_offset)
            data = handle.read()
            complete = data[: data.rfind(b"\n") + 1]
            self._audit_offset += len(complete)
            self._records += [orjson.loads(line) for line in complete.splitlines() if line]
        return list(self._records)
