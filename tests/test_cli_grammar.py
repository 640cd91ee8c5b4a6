"""One grammar across the commands: the same session references and --data everywhere, --json
with errors as records, --debug anywhere, a one-line summary on stderr, progress that clears
itself, tables that fit 80 columns, help on a bare call, shell completion."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tests.paths import SMOLLM2
from tests.test_dsh_helpers import install_session

from looprescue.cli import take_debug_flag
from looprescue.commands.common import Settings
from looprescue.dsh import open_log

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def looprescue(*args: str, env: dict | None = None, cwd: Path | None = None):
    return subprocess.run(
        [sys.executable, "-m", "looprescue", *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        cwd=cwd,
    )


def on_terminal(*args: str, columns: int = 80) -> tuple[int, str]:
    """Run with stdout and stderr on one pseudo-terminal ``columns`` wide: (code, screen)."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "40", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "looprescue", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    screen = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    code = process.wait(timeout=300)
    reader.join(timeout=10)
    os.close(master)
    return code, screen.decode("utf-8", "replace")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data dir with a looping session, a tool-loop session and a clean one."""
    root = tmp_path / "sessions"
    for scenario in ("a_reasoning_loop", "d_tool_loop", "g_healthy_long_answer"):
        install_session(root, scenario)
    return root


def looping_id(data: Path) -> str:
    """The id `scan` prints for the looping session."""
    result = looprescue("scan", "--data", str(data))
    assert result.returncode == 1, result.stderr
    (line,) = result.stdout.splitlines()
    return line.split()[0]


# -- session references -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ("scan",),
        ("doctor",),
        ("sessions",),
        ("report", "-o", "{out}"),
        ("clean", "--dry-run"),
        ("repair", "--dry-run"),
    ],
)
def test_every_command_takes_the_ids_scan_prints(data, tmp_path, command):
    ident = looping_id(data)
    bare = ident.removeprefix("session-")
    args = [part.format(out=tmp_path / "r.html") for part in command]
    for reference in (ident, ident[:16], bare[:8], str(data / "--home-ana-proj--" / ident)):
        result = looprescue(*args, reference, "--data", str(data))
        assert result.returncode in (0, 1), (reference, result.stderr)
        assert "no session" not in result.stderr and "error" not in result.stderr


def test_an_id_is_found_by_its_header_when_the_dir_is_named_otherwise(tmp_path):
    log = install_session(tmp_path / "sessions", "a_reasoning_loop")
    renamed = log.parent.with_name("copied")
    log.parent.rename(renamed)
    ident = open_log(renamed / log.name).session_id
    result = looprescue("scan", ident[:20], "--data", str(tmp_path / "sessions"), "--json")
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout.splitlines()[0])["session"] == ident


def test_an_ambiguous_or_unknown_id_is_an_error_naming_it(data):
    result = looprescue("scan", "session-", "--data", str(data))
    assert result.returncode == 2 and "ambiguous" in result.stderr
    result = looprescue("doctor", "ffffffff", "--data", str(data))
    assert result.returncode == 2 and "no session 'ffffffff'" in result.stderr


# -- --json: errors are records ----------------------------------------------------------------


@pytest.mark.parametrize("command", ["scan", "doctor", "sessions", "report", "clean"])
def test_json_errors_are_records(data, tmp_path, command):
    extra = ["-o", str(tmp_path / "r.html")] if command == "report" else []
    result = looprescue(command, "nosuchsession", "--data", str(data), "--json", *extra)
    assert result.returncode == 2
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records and records[-1]["kind"] == "error"
    assert "nosuchsession" in records[-1]["message"]


# -- --debug anywhere ---------------------------------------------------------------------------


def test_debug_is_taken_from_anywhere_before_a_double_dash():
    Settings.debug = False
    try:
        assert take_debug_flag(["scan", "x", "--debug"]) == ["scan", "x"]
        assert Settings.debug
        Settings.debug = False
        assert take_debug_flag(["scan", "--", "--debug"]) == ["scan", "--", "--debug"]
        assert not Settings.debug
    finally:
        Settings.debug = False


def test_debug_after_the_command_is_accepted(data):
    result = looprescue("scan", "--data", str(data), "--debug")
    assert result.returncode == 1, result.stderr
    assert "No such option" not in result.stderr


# -- one summary line on stderr ----------------------------------------------------------------


def test_every_command_ends_with_a_summary_on_stderr(data, tmp_path):
    scan = looprescue("scan", "--data", str(data))
    assert re.search(r"^3 sessions, 1 loop in 1, [\d,]+ output tokens in loops$", scan.stderr, re.M)
    # the looping session's loop is in its reasoning: watching text only, none loops
    ok = looprescue("scan", str(data / "--home-ana-proj--"), "--set", "watch=text")
    assert ok.returncode == 0 and ok.stdout == ""
    assert ok.stderr.strip().splitlines()[-1] == "3 sessions, no loops"
    doctor = looprescue("doctor", "--data", str(data))
    assert doctor.stderr.strip().splitlines()[-1] == "3 sessions, 1 detour signal in 1"
    sessions = looprescue("sessions", "--data", str(data))
    assert sessions.stderr.strip().splitlines()[-1] == "3 sessions"
    report = looprescue("report", "--data", str(data), "-o", str(tmp_path / "r.html"))
    assert report.stderr.strip().splitlines()[-1].startswith("wrote ")
    dry = looprescue("clean", looping_id(data), "--data", str(data), "--dry-run")
    assert re.search(r"^1 session, 1 message to cut, [\d,]+ chars \(dry run", dry.stderr, re.M)
    evaluation = looprescue("eval", str(SMOLLM2))
    assert re.search(r"^\d+ records, 0 misjudged", evaluation.stderr, re.M)


# -- progress clears itself --------------------------------------------------------------------


@pytest.mark.parametrize(("command", "verb"), [("scan", "scanning"), ("doctor", "diagnosing")])
def test_the_progress_bar_never_shares_a_line_with_a_result(data, command, verb):
    code, screen = on_terminal(command, "--data", str(data))
    assert code == 1
    assert verb in screen  # it was shown
    pieces = [ANSI.sub("", p) for p in re.split(r"[\r\n]", screen)]
    assert not [p for p in pieces if verb in p and ("session" in p.replace("sessions", ""))]
    # the bar's last drawing is erased: after it only the erase and the summary follow
    tail = screen[screen.rindex(verb) :]
    assert "\x1b[2K" in tail
    assert ANSI.sub("", tail.split("\x1b[2K")[-1]).strip().splitlines()[-1].startswith("3 sessions")


# -- 80 columns ---------------------------------------------------------------------------------


def test_sessions_fit_80_columns_with_ids_the_other_commands_take(data):
    code, screen = on_terminal("sessions", "--data", str(data), columns=80)
    assert code == 0
    lines = [ANSI.sub("", line) for line in re.split(r"[\r\n]", screen)]
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    shown = [line.split()[1] for line in lines if re.match(r"^\s+\d+\s", line)]
    assert len(shown) == 3 and all(len(ident) >= 8 and "…" not in ident for ident in shown)
    for ident in shown:
        result = looprescue("sessions", ident, "--data", str(data), "--json")
        assert result.returncode == 0 and len(result.stdout.splitlines()) == 1, ident


def test_eval_fits_80_columns_and_explains_its_columns():
    code, screen = on_terminal("eval", str(SMOLLM2), columns=80)
    assert code == 0
    lines = [ANSI.sub("", line) for line in screen.replace("\r", "").split("\n")]
    table = [line for line in lines if line.startswith(" smollm2-")]
    assert table and all(len(line) <= 80 for line in table)
    for column in ("verdict", "rule", "delay", "beyond", "shown"):
        assert any(line.startswith(f"  {column}: ") for line in lines), column


# -- the program itself -------------------------------------------------------------------------


def test_bare_looprescue_prints_help_and_exits_zero():
    result = looprescue()
    assert result.returncode == 0
    assert result.stdout.startswith("Usage: looprescue") and "Commands:" in result.stdout


def test_shell_completion_can_be_installed(tmp_path):
    env = {"HOME": str(tmp_path), "SHELL": "/bin/bash"}
    shown = looprescue("--show-completion", "bash", env=env)
    assert shown.returncode == 0 and "_LOOPRESCUE_COMPLETE" in shown.stdout
    installed = looprescue("--install-completion", "bash", env=env)
    assert installed.returncode == 0, installed.stderr
    assert "looprescue" in (tmp_path / ".bashrc").read_text()
    # what the installed function asks: the commands, completed
    complete = subprocess.run(
        [sys.executable, "-m", "looprescue"],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "_LOOPRESCUE_COMPLETE": "complete_bash",
            "COMP_WORDS": "looprescue sc",
            "COMP_CWORD": "1",
        },
    )
    assert "scan" in complete.stdout.split()


def test_eval_on_the_repos_corpus_exits_zero_when_every_record_is_judged_right():
    result = looprescue("eval", str(SMOLLM2))
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if "smollm2-" in line]
    assert rows and not [row for row in rows if "MISSED" in row or "FALSE" in row]
    strict = looprescue("eval", str(SMOLLM2), "--strict")
    beyond = "with loop text beyond one copy" in result.stderr
    assert strict.returncode == (1 if beyond else 0)


def test_doctor_tables_fit_80_columns(data):
    code, screen = on_terminal("doctor", "--data", str(data), columns=80)
    assert code == 1
    lines = [ANSI.sub("", line) for line in re.split(r"[\r\n]", screen)]
    assert any("repeat:bash" in line for line in lines)
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
