"""Exit codes of the offline commands: 1 only ever means "found something". A bug exits 3
with one line saying so (``--debug`` adds the traceback), and in a run over several sessions
it is reported for its session while the others are still processed.

The bugs here are injected (looprescue has none we know of): the child process replaces one
function with one that raises, then runs the real command line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.test_dsh_helpers import install_session
from typer.testing import CliRunner

from looprescue.cli import app

runner = CliRunner()

# Raises for the session whose log path contains BROKEN, works for every other one.
INJECT = """
import sys, functools
module, name = sys.argv.pop(1), sys.argv.pop(1)
import importlib
target = importlib.import_module(module)
real = getattr(target, name)
@functools.wraps(real)
def broken(*args, **kwargs):
    if "BROKEN" in repr(args) + repr(kwargs):
        raise KeyError("injected")
    return real(*args, **kwargs)
setattr(target, name, broken)
from looprescue.cli import main
main()
"""


def cli_with_bug(module: str, name: str, *args: object) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", INJECT, module, name, *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def two_sessions(data: Path) -> tuple[Path, Path]:
    broken = install_session(data, "a_reasoning_loop")
    broken = broken.parent.rename(broken.parent.with_name("session-BROKEN")) / broken.name
    good = install_session(data, "b_verbatim_cycle")
    return broken, good


@pytest.mark.parametrize(
    ("command", "module", "name"),
    [
        ("scan", "looprescue.commands.scan", "open_log"),
        ("doctor", "looprescue.commands.doctor", "open_log"),
        ("sessions", "looprescue.commands.sessions", "summarize_session"),
    ],
)
def test_a_bug_in_one_session_is_exit_3_and_the_others_are_still_processed(
    tmp_path, command, module, name
):
    data = tmp_path / "sessions"
    broken, good = two_sessions(data)
    args = ["sessions", "--data", data] if command == "sessions" else [command, data]
    result = cli_with_bug(module, name, *args)
    assert result.returncode == 3, result.stderr
    [line] = [x for x in result.stderr.splitlines() if "internal error" in x]
    assert line.startswith(f"looprescue: internal error while reading {broken}: KeyError")
    assert "This is a bug in looprescue" in line and "issue tracker" in line
    assert "Traceback" not in result.stderr
    assert good.parent.name in result.stdout  # the session after it was still processed


def test_a_bug_in_a_single_command_is_exit_3_and_debug_shows_the_traceback(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "b_verbatim_cycle")
    log = log.parent.rename(log.parent.with_name("session-BROKEN")) / log.name
    plain = cli_with_bug("looprescue.commands.clean", "open_log", "clean", log, "--yes")
    assert plain.returncode == 3 and plain.stdout == ""
    [line] = plain.stderr.splitlines()
    assert "internal error: KeyError: 'injected' at looprescue/" in line
    debug = cli_with_bug("looprescue.commands.clean", "open_log", "--debug", "clean", log, "--yes")
    assert debug.returncode == 3
    assert debug.stderr.startswith("Traceback (most recent call last):")
    assert debug.stderr.splitlines()[-1] == line


def test_no_answer_at_a_prompt_is_not_exit_1(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "b_verbatim_cycle")
    before = log.read_bytes()
    result = runner.invoke(app, ["clean", str(log), "--data", str(data)], input="")
    assert result.exit_code == 2, result.output
    assert "aborted: nothing was written" in result.stderr
    assert log.read_bytes() == before


def test_a_closed_pipe_is_not_a_finding_nor_a_bug(tmp_path):
    data = tmp_path / "sessions"
    for scenario in ("a_reasoning_loop", "b_verbatim_cycle", "h_stream_cut"):
        install_session(data, scenario)
    child = subprocess.Popen(
        [sys.executable, "-c", "from looprescue.cli import main; main()", "scan", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    child.stdout.close()  # like `looprescue scan | head -0`
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=120) == 141, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr


def test_usage_errors_stay_exit_2():
    result = runner.invoke(app, ["scan", "--no-such-flag"])
    assert result.exit_code == 2
