"""Helpers for tests that edit copies of the real fixtures (plus checks of the helpers)."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

from tests.paths import SESSIONS

from looprescue.dsh import open_log
from looprescue.dsh.frames import compress_frame, iter_frames

PROJECT = "--home-ana-proj--"


def fixture_log(scenario: str) -> Path:
    return SESSIONS / scenario / "session" / "session.v4.jsonl.zstd"


def install_session(data_dir: Path, scenario: str, *, plain: bool = False) -> Path:
    """Copy a fixture session into ``data_dir/<project>/<session id>/`` the way DSH lays it
    out (log 0600, lock 0644, dirs 0700); returns the log path."""
    source = fixture_log(scenario)
    session_id = open_log(source).session_id
    session_dir = data_dir / PROJECT / session_id
    session_dir.mkdir(parents=True, mode=0o700)
    name = "session.v4.jsonl" if plain else "session.v4.jsonl.zstd"
    log = session_dir / name
    shutil.copyfile(source.with_suffix("") if plain else source, log)
    log.chmod(0o600)
    (session_dir / "session.lock").touch(0o644)
    return log


def write_frames(path: Path, batches: list[list[bytes]]) -> Path:
    path.write_bytes(b"".join(compress_frame(b"".join(x + b"\n" for x in b)) for b in batches))
    return path


def tree_state(root: Path) -> dict[str, tuple[str, int]]:
    """Every entry under ``root`` with its content hash (regular files) and mtime: 'nothing
    was written'. FIFOs, devices and symlinks are recorded without being opened."""
    state = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                digest = f"mode {st.st_mode:o}"
            state[str(path.relative_to(root))] = (digest, st.st_mtime_ns)
    return state


def raw_frames(path: Path) -> list[bytes]:
    data = path.read_bytes()
    return [data[f.offset : f.offset + f.size] for f in iter_frames(path)]


def test_install_session_lays_out_like_dsh(tmp_path):
    log = install_session(tmp_path, "a_reasoning_loop")
    assert log.parent.name == "session-52b2090c-ecf9-43fe-90f7-e600a0a5a328"
    assert log.parent.parent.name == PROJECT
    assert log.stat().st_mode & 0o777 == 0o600
    assert log.read_bytes() == fixture_log("a_reasoning_loop").read_bytes()


def test_raw_frames_concatenate_to_the_file():
    path = fixture_log("d_tool_loop")
    assert b"".join(raw_frames(path)) == path.read_bytes()
    assert len(raw_frames(path)) == 25
