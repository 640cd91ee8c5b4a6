"""Finding session logs, the data directory, project keys, summaries and the DSH lock."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from tests.paths import SESSIONS

from looprescue.dsh import (
    NoSessionsError,
    SessionAccessError,
    SessionLock,
    SessionLockedError,
    decode_project_key,
    find_session_logs,
    is_locked_by_dsh,
    resolve_data_dir,
    summarize_session,
)


def test_data_dir_walk_finds_every_session_including_the_subagent_child():
    logs = find_session_logs([SESSIONS])
    assert len(logs) == 13
    assert all(p.name == "session.v4.jsonl.zstd" for p in logs)  # zstd preferred over the copy
    assert any(p.parent.name.startswith("session-0dde70d0") for p in logs)


def test_session_dir_and_file_inputs_deduplicate():
    session_dir = SESSIONS / "b_verbatim_cycle" / "session"
    logs = find_session_logs([session_dir, session_dir / "session.v4.jsonl.zstd"])
    assert logs == [session_dir / "session.v4.jsonl.zstd"]
    plain = session_dir / "session.v4.jsonl"
    assert find_session_logs([plain]) == [plain]


def test_backup_dir_is_not_scanned(tmp_path):
    backup = tmp_path / "sessions-loop-rescue-backup" / "--p--" / "s1"
    shutil.copytree(SESSIONS / "g_healthy_long_answer" / "session", backup)
    with pytest.raises(NoSessionsError):
        find_session_logs([tmp_path])


def test_empty_and_missing_inputs(tmp_path):
    with pytest.raises(NoSessionsError) as info:
        find_session_logs([tmp_path])
    assert str(tmp_path) in str(info.value)
    with pytest.raises(SessionAccessError, match="no such file"):
        find_session_logs([tmp_path / "missing"])


def test_resolve_data_dir_order(tmp_path):
    assert resolve_data_dir(tmp_path, env={"DSH_HOME": "/x"}) == tmp_path
    assert resolve_data_dir(None, env={"DSH_HOME": "/x"}).as_posix() == "/x/sessions"
    assert resolve_data_dir(None, env={"DSH_HOME": "  ", "HOME": "/h"}).name == "sessions"
    assert resolve_data_dir(None, env={}).parent.name == ".dsh"


def test_project_key_decoding():
    assert decode_project_key("--home-ana-proj--") == "home-ana-proj"
    assert decode_project_key("--home-My~0020Proj.v2~007E~00FC-x--") == "home-My Proj.v2~ü-x"
    assert decode_project_key("--~D83D~DE00--") == "😀"


def test_summary_of_a_two_turn_session():
    log = SESSIONS / "e_tool_error_two_turns" / "session" / "session.v4.jsonl.zstd"
    summary = summarize_session(log)
    assert summary.id.startswith("session-ce6cb294")
    assert summary.turns == 2 and summary.events == 43
    assert summary.title == "Read does-not-exist notes txt and"
    assert summary.cwd == "/tmp/looprescue-dsh-record/proj"
    assert summary.created < summary.last_event_time
    assert summary.size == log.stat().st_size
    assert summary.locked is False and summary.subagent is False


def test_summary_marks_subagent_child():
    child = next(p for p in find_session_logs([SESSIONS / "i_subagent"]) if "0dde70d0" in str(p))
    assert summarize_session(child).subagent is True


def test_lock_held_in_this_process_is_seen(tmp_path):
    assert is_locked_by_dsh(tmp_path) is False
    assert not (tmp_path / "session.lock").exists()  # probing never creates it
    with SessionLock(tmp_path):
        assert is_locked_by_dsh(tmp_path) is True
        with pytest.raises(SessionLockedError, match="DSH is using this session"):
            SessionLock(tmp_path).acquire()
    assert is_locked_by_dsh(tmp_path) is False


def test_lock_held_by_another_process_is_seen(tmp_path):
    lock = tmp_path / "session.lock"
    lock.touch()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,sys;f=open(sys.argv[1]);fcntl.flock(f,fcntl.LOCK_EX);"
            "print('held',flush=True);sys.stdin.read()",
            str(lock),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert is_locked_by_dsh(tmp_path) is True
    finally:
        holder.stdin.close()
        holder.wait()
    assert is_locked_by_dsh(tmp_path) is False
