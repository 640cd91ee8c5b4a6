"""A real ``redis-server`` on a loopback port for tests (installed from Debian when missing)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager


def ensure_redis_server() -> str:
    """Path of redis-server; installs the Debian package when it is not there (CI runs as
    root on a clean machine)."""
    found = shutil.which("redis-server")
    if found:
        return found
    for command in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "redis-server"],
    ):
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    found = shutil.which("redis-server")
    if not found:
        raise RuntimeError("redis-server is not on PATH after installing the Debian package")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def redis_server() -> Iterator[str]:
    """Run redis-server on 127.0.0.1 (no persistence); yields its URL."""
    binary = ensure_redis_server()
    port = _free_port()
    with tempfile.TemporaryDirectory() as workdir:
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                workdir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 15
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                        sock.sendall(b"PING\r\n")
                        if sock.recv(16).startswith(b"+PONG"):
                            break
                except OSError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start: {process.stderr.read()!r}")
                time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(timeout=10)
