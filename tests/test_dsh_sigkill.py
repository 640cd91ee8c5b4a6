"""SIGKILL at random points while ``clean`` and ``repair`` rewrite a 30 MB session.

Whenever the process dies, the log is byte for byte either the original or the complete
result, and the next run finishes the job and leaves no temp file behind (beside the log or
in the backup dir). The session is built from the real fixtures (30 MB of decompressed JSONL,
benchmarks/synthetic_session.py); the kill points are drawn at random within the time one
uninterrupted run takes, measured first in the same test.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from benchmarks.synthetic_session import build_large_session

KILLS_PER_COMMAND = 3
SESSION_BYTES = 30_000_000


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def temp_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.name.endswith(".tmp"))


@pytest.fixture(scope="module")
def big_log(tmp_path_factory) -> Path:
    log = (
        tmp_path_factory.mktemp("big")
        / "--home-ana-proj--"
        / "session-big"
        / "session.v4.jsonl.zstd"
    )
    build_large_session(log, SESSION_BYTES)
    return log


def start(command: str, log: Path, data: Path) -> subprocess.Popen:
    cli = [sys.executable, "-c", "from looprescue.cli import main; main()"]
    return subprocess.Popen(
        [*cli, command, str(log), "--data", str(data), "--yes"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def fresh_copy(source: bytes, root: Path) -> tuple[Path, Path]:
    shutil.rmtree(root, ignore_errors=True)
    data = root / "sessions"
    log = data / "--home-ana-proj--" / "session-big" / "session.v4.jsonl.zstd"
    log.parent.mkdir(parents=True)
    log.write_bytes(source)
    log.chmod(0o600)
    return data, log


@pytest.mark.timeout(300)
@pytest.mark.parametrize("command", ["clean", "repair"])
def test_a_kill_at_any_point_leaves_the_original_or_the_result(tmp_path, big_log, command):
    source = big_log.read_bytes()
    if command == "repair":
        source = source[:-7]  # the last frame is torn: its checksum never made it to disk
    root = tmp_path / "run"

    data, log = fresh_copy(source, root)
    began = time.monotonic()
    reference = start(command, log, data)
    assert reference.wait(timeout=120) == 0, reference.stderr.read().decode()
    duration = time.monotonic() - began
    result = digest(log)
    original = hashlib.sha256(source).hexdigest()
    assert result != original and temp_files(root) == []

    rng = random.Random()
    for _ in range(KILLS_PER_COMMAND):
        at = rng.uniform(0.05, 1.0) * duration
        data, log = fresh_copy(source, root)
        child = start(command, log, data)
        time.sleep(at)
        child.kill()
        child.wait(timeout=60)
        now = digest(log)
        assert now in (original, result), f"{command} killed after {at:.2f}s: a partial log"
        rerun = start(command, log, data)
        assert rerun.wait(timeout=120) == 0, rerun.stderr.read().decode()
        assert digest(log) == result, f"{command} killed after {at:.2f}s, then run again"
        assert temp_files(root) == [], f"{command} killed after {at:.2f}s: temp files left"
        assert oct(os.stat(log).st_mode & 0o777) == oct(0o600)
