"""Helpers shared by the commands: config overrides from flags, exit codes, and how errors,
warnings and crashes are reported."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import typer
import yaml
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

from looprescue.config import NULL, ConfigError
from looprescue.dsh import (
    SessionAccessError,
    SessionError,
    find_session_logs,
    resolve_data_dir,
    resolve_session,
)

SET_HELP = "Set one config key, e.g. detector.poolWindow=40 (repeatable)."

# 1 means "found something" (a loop, a detour), never "failed": a script can rely on it.
EXIT_OK, EXIT_FOUND, EXIT_UNREADABLE, EXIT_BUG = 0, 1, 2, 3
REPORT_TO = "the looprescue issue tracker"


# The one grammar of session references, the same in every command that reads sessions.
SESSIONS_HELP = (
    "Session logs, session dirs, data dirs, session ids or unique id prefixes "
    "(default: every session in the data dir)."
)
SESSION_HELP = "Session id (or a unique prefix), session dir or log."
DATA_HELP = (
    "Data dir: where session ids are looked up, and what is read when no session is named "
    "(default: $DSH_HOME/sessions, else ~/.dsh/sessions)."
)


def sessions_argument(help: str = SESSIONS_HELP) -> Any:
    return typer.Argument(
        None,
        metavar="SESSION",
        help=help,
        show_default=False,
    )


def data_option() -> Any:
    return typer.Option(None, "--data", metavar="DIR", help=DATA_HELP, readable=False)


def session_logs(refs: list[str] | None, data: Path | None) -> list[Path]:
    """The logs named by ``refs``, each a path (log, session dir or data dir) or a session id
    or unique id prefix looked up under the data dir; every session in the data dir when
    ``refs`` is empty. Raises SessionError naming the reference that fails."""
    data_dir = resolve_data_dir(data)
    if not refs:
        return find_session_logs([data_dir])
    found: list[Path] = []
    seen: set[str] = set()
    for ref in refs:
        if os.path.lexists(Path(ref).expanduser()):
            logs = find_session_logs([ref])
        else:
            logs = [resolve_session(ref, data_dir)]
        for log in logs:
            key = os.path.realpath(log)
            if key not in seen:
                seen.add(key)
                found.append(log)
    return found


def one_log(ref: str, data: Path | None) -> Path:
    """The one log a single-session command (clean, repair) works on."""
    logs = session_logs([ref], data)
    if len(logs) != 1:
        raise SessionAccessError(
            f"expected one session here, found {len(logs)}; name a session directory or id",
            path=ref,
        )
    return logs[0]


def error_record(exc: Exception) -> dict[str, Any]:
    """An error as a --json record."""
    if isinstance(exc, SessionError):
        return exc.to_dict()
    return {"kind": "error", "path": None, "message": str(exc)}


def emit(line: str) -> None:
    """One line of results on stdout. Through ``sys.stdout`` as it is now, so that while a
    progress bar shows (and has put a proxy there) the bar is cleared before the line and
    drawn again below it; click's echo keeps the stream it first saw and would print the
    line glued to the bar."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def note(line: str) -> None:
    """One line for people on stderr (warnings, errors, the summary), as ``emit`` does."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def summary(text: str) -> None:
    """The one line every command ends with on stderr, e.g. ``13 sessions, 6 loops in 5``."""
    sys.stdout.flush()  # after every result, also when both go to one terminal
    note(text)


def plural(count: int, word: str) -> str:
    """``1 turn``, ``2 turns``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def counted(count: int, word: str, sessions: int) -> str:
    """``6 loops in 5`` (sessions), ``no loops``."""
    if not count:
        return f"no {word}s"
    return f"{plural(count, word)} in {sessions}"


class Settings:
    """Options of the whole command line (set by the top-level callback on every run)."""

    debug = False


def session_progress(
    err: Console, verb: str, unit: str = "sessions", show: bool = True
) -> Progress:
    """A progress bar on stderr (``verb``, done/total ``unit``, elapsed), shown only when
    ``show`` and stderr is a terminal: logs and pipes get nothing. While it shows, what the
    command prints goes above it; stdout is only redirected when it is that terminal too, so
    ``looprescue scan | grep …`` still gets every line."""
    return _progress(
        err, show, TextColumn(verb), BarColumn(), MofNCompleteColumn(), TextColumn(unit)
    )


def byte_progress(err: Console, verb: str, show: bool = True) -> Progress:
    """The same over the bytes of a file (one large log)."""
    return _progress(
        err, show, TextColumn(verb), BarColumn(), DownloadColumn(), TransferSpeedColumn()
    )


def busy(err: Console, what: str) -> Progress:
    """A spinner with ``what`` on stderr while a step without a measure runs (terminal only)."""
    progress = _progress(err, True, SpinnerColumn(), TextColumn(what))
    progress.add_task(what, total=None)
    return progress


def _progress(err: Console, show: bool, *columns: ProgressColumn) -> Progress:
    return Progress(
        *columns,
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not (show and err.is_terminal),
        redirect_stdout=sys.stdout.isatty(),
    )


def parse_settings(items: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` flags as dotted-key overrides; values are read as YAML scalars."""
    overrides: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. detector.poolWindow=40")
        try:
            value = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError:
            raise ConfigError(f"--set {key}: cannot read value {raw!r}") from None
        overrides[key] = NULL if value is None else value
    return overrides


def report_session_error(exc: SessionError, json_output: bool) -> None:
    """On stderr for people; with --json also as a record on stdout."""
    note(f"error: {exc}")
    if json_output:
        emit(orjson.dumps(exc.to_dict()).decode())


def report_warnings(path: Path, warnings: list[str]) -> None:
    """What a reader tolerated in one log (and how many more it did not list)."""
    for warning in warnings:
        note(f"warning: {path}: {warning}")
    dropped = getattr(warnings, "dropped", 0)
    if dropped:
        note(f"warning: {path}: {dropped} more warnings not shown")


def crash_line(exc: BaseException, path: Path | None = None) -> str:
    """One line for an exception that is a bug: what, where in looprescue, where to report."""
    where = ""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        marker = frame.filename.rfind("looprescue/")
        if marker >= 0:
            where = f" at {frame.filename[marker:]}:{frame.lineno}"
            break
    reading = f" while reading {path}" if path is not None else ""
    detail = str(exc).splitlines()[0][:200] if str(exc) else ""
    return (
        f"looprescue: internal error{reading}: {type(exc).__name__}"
        f"{': ' + detail if detail else ''}{where}. This is a bug in looprescue, not a problem "
        f"you caused; please report it to {REPORT_TO} with this line "
        "(run again with --debug for the traceback)."
    )


def report_crash(exc: BaseException, path: Path | None = None) -> None:
    """Report a bug: one line, plus the traceback with --debug."""
    if Settings.debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    note(crash_line(exc, path))


def one_session(path: Path, json_output: bool, work: Callable[[], int]) -> int:
    """Run ``work`` for one session of a multi-session command and return its exit code.
    Unreadable input is reported (2), a bug is reported as one line (3); either way the
    caller goes on with the next session. With --json each is a record on stdout too."""
    try:
        return work()
    except SessionError as exc:
        report_session_error(exc, json_output)
        return EXIT_UNREADABLE
    except BrokenPipeError:
        raise
    except Exception as exc:
        report_crash(exc, path)
        if json_output:
            record = {"kind": "error", "path": str(path), "message": crash_line(exc, path)}
            emit(orjson.dumps({**record, "bug": True}).decode())
        return EXIT_BUG


def worst(codes: list[int]) -> int:
    """The exit code of a run over several sessions: a bug beats unreadable input beats a
    finding beats nothing."""
    for code in (EXIT_BUG, EXIT_UNREADABLE, EXIT_FOUND):
        if code in codes:
            return code
    return EXIT_OK
