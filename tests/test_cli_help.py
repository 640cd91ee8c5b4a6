"""The command line reads like a well-kept CLI's: one-line summaries in the command list, no
type labels on flags, examples where they help; progress on stderr only when it is a
terminal, never in the way of what goes to stdout."""

from __future__ import annotations

import os
import pty
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tests.paths import SESSIONS
from tests.test_dsh_helpers import install_session

from looprescue.cli import COMMAND_MODULES, app

COMMANDS = [info.name for info in app.registered_commands]
TYPE_LABEL = re.compile(r"<(bool|str|int|float|path|list\[[^>]*\]|[a-z_]+)>")


def looprescue(*args: str, **options) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "looprescue", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=env,
        **options,
    )


def test_every_command_module_is_registered():
    assert len(COMMANDS) == len(COMMAND_MODULES)


def test_the_command_list_gives_one_whole_sentence_per_command():
    result = looprescue("--help")
    assert result.returncode == 0
    listing = result.stdout.split("Commands:")[1].strip().splitlines()
    assert [line.split()[0] for line in listing] == COMMANDS  # one line each, in order
    for line in listing:
        summary = line.split(None, 1)[1]
        assert summary.endswith(".") and not summary.endswith("..."), line
    assert "looprescue demo" in result.stdout  # where a new user starts


@pytest.mark.parametrize("command", COMMANDS)
def test_command_help_has_no_type_labels_and_a_summary(command):
    result = looprescue(command, "--help")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert not TYPE_LABEL.search(text), TYPE_LABEL.search(text).group(0)
    usage, summary = text.split("\n\n")[:2]
    assert usage.startswith(f"Usage: looprescue {command} ")
    assert "\n" not in summary.strip() and summary.strip().endswith(".")
    assert "Options:" in text and "-h, --help" in text
    for line in text.splitlines():
        assert len(line) <= 100, line
    # every flag is documented
    for option in re.findall(r"^\s+(--[a-z-]+)", text, re.M):
        (row,) = [x for x in text.splitlines() if x.strip().startswith(option)]
        assert len(row.split()) > 1 or option == "--state", row


def run_with_terminal_stderr(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal and stdout on a pipe: (code, stdout, terminal)."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm-256color"}
    process = subprocess.Popen(
        [sys.executable, "-m", "looprescue", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        cwd=cwd,
    )
    os.close(slave)
    screen = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other end closed
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    stdout = process.communicate(timeout=120)[0]
    reader.join(timeout=10)
    os.close(master)
    return process.returncode, stdout.decode(), screen.decode("utf-8", "replace")


@pytest.mark.parametrize(("command", "verb"), [("scan", "scanning"), ("doctor", "diagnosing")])
def test_progress_shows_on_a_terminal_and_stdout_stays_whole(command, verb):
    plain = looprescue(command, str(SESSIONS))
    assert plain.returncode == 1 and verb not in plain.stderr  # not a terminal: no progress
    code, stdout, screen = run_with_terminal_stderr(command, str(SESSIONS))
    assert code == 1
    assert verb in screen and "sessions" in screen
    assert stdout == plain.stdout  # every finding reached the pipe, none went to the terminal


def test_clean_shows_its_progress_on_a_terminal(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    before = log.read_bytes()
    code, stdout, screen = run_with_terminal_stderr("clean", "--data", str(data), str(log), "--yes")
    assert code == 0, screen
    assert "reading" in screen and "writing and verifying" in screen
    assert "cleaned" in stdout and log.read_bytes() != before
    silent = looprescue("clean", "--data", str(data), "--undo", str(log), "--yes")
    assert silent.returncode == 0 and "reading" not in silent.stderr
    assert log.read_bytes() == before
    shutil.rmtree(data)
