"""Where DSH keeps sessions, which files are session logs, and what each session is."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from looprescue.dsh.errors import NoSessionsError, SessionAccessError, SessionError
from looprescue.dsh.lines import access_error, not_regular
from looprescue.dsh.lock import is_locked_by_dsh
from looprescue.dsh.log import LOG_FILE_NAMES, open_log
from looprescue.dsh.views import SessionTitle

# Preferred first: a session dir holding both encodings is read from the zstd file DSH uses.
LOG_NAME_PREFERENCE = tuple(LOG_FILE_NAMES)
BACKUP_DIR_NAME = "sessions-loop-rescue-backup"


def resolve_data_dir(data: str | Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """``--data DIR``, else ``$DSH_HOME/sessions`` (if non-blank), else ``~/.dsh/sessions``."""
    if data is not None:
        return Path(data).expanduser()
    env = os.environ if env is None else env
    home = env.get("DSH_HOME", "")
    if home.strip():
        return Path(home).expanduser() / "sessions"
    return Path("~/.dsh/sessions").expanduser()


def session_log_in(directory: Path) -> Path | None:
    """The log file of a session directory, or None."""
    for name in LOG_NAME_PREFERENCE:
        candidate = directory / name
        if os.path.lexists(candidate):
            return candidate
    return None


def find_session_logs(paths: Iterable[str | Path]) -> list[Path]:
    """Session log files named by ``paths``: each a log file, a session dir, or a data dir
    (searched recursively, subagent session dirs included; backup dirs skipped).

    Raises SessionAccessError for a path that is missing, a symlink loop or not a regular file
    or directory, and NoSessionsError for a directory with none. A file found inside a
    directory is listed by its name; opening it checks that it is a regular file.
    """
    found: list[Path] = []
    seen: set[str] = set()
    for raw in paths:
        path = Path(raw).expanduser()
        try:
            mode = os.stat(path).st_mode
        except OSError as err:
            if isinstance(err, FileNotFoundError) and not os.path.lexists(path):
                raise SessionAccessError("no such file or directory", path=path) from None
            raise access_error(err, path) from None
        if stat.S_ISDIR(mode):
            logs = _logs_under(path)
            if not logs:
                raise NoSessionsError("no DSH session logs in this directory", path=path)
        elif stat.S_ISREG(mode):
            logs = [path]
        else:
            raise SessionAccessError(not_regular(mode) or "not a regular file", path=path)
        for log in logs:
            key = os.path.realpath(log)  # never raises, unlike Path.resolve on a symlink loop
            if key not in seen:
                seen.add(key)
                found.append(log)
    return found


def _logs_under(root: Path) -> list[Path]:
    errors: list[OSError] = []
    logs = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=errors.append):
        dirnames[:] = sorted(d for d in dirnames if d != BACKUP_DIR_NAME)
        names = set(filenames)
        for name in LOG_NAME_PREFERENCE:
            if name in names:
                logs.append(Path(dirpath) / name)
                break
    if errors and not logs:
        err = errors[0]
        raise SessionAccessError(
            f"cannot list directory: {err.strerror or err}", path=err.filename or root
        )
    return logs


_ESCAPE = re.compile(r"~([0-9A-F]{4})")


def decode_project_key(key: str) -> str:
    """Readable form of a ``--<project-key>--`` dir name: ``~XXXX`` escapes decoded, wrapper
    dashes stripped. Path separators became ``-`` and cannot be told apart from real dashes, so
    this is for display only; the header's ``cwd`` is the real path."""
    inner = key[2:-2] if key.startswith("--") and key.endswith("--") and len(key) > 4 else key
    units = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), inner)
    # Escapes are UTF-16 code units: re-pair surrogates into real characters.
    return units.encode("utf-16", "surrogatepass").decode("utf-16", errors="replace")


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """What ``looprescue sessions`` shows for one session."""

    id: str
    path: Path
    project: str
    cwd: str | None
    title: str | None
    created: int
    last_event_time: float | None
    turns: int
    events: int
    size: int
    locked: bool
    subagent: bool
    damage: str | None = None  # a torn tail DSH would drop on open; `repair` fixes it
    warnings: tuple[str, ...] = ()  # what the reader tolerated (see views.py)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "path": str(self.path),
            "project": self.project,
            "cwd": self.cwd,
            "title": self.title,
            "created": self.created,
            "lastEventTime": self.last_event_time,
            "turns": self.turns,
            "events": self.events,
            "size": self.size,
            "lockedByDsh": self.locked,
            "subagent": self.subagent,
            "damage": self.damage,
        }


def summarize_session(log_path: Path) -> SessionSummary:
    """Read one log completely (streamed) and summarise it. Raises SessionError."""
    log = open_log(log_path)
    title = None
    last_time = None
    turns = 0
    count = 0
    for record in log.records(tolerate_torn_tail=True):
        count += 1
        last_time = record.event["time"]
        if record.type == "turn/start":
            turns += 1
        elif isinstance(record.view, SessionTitle):
            title = record.view.title
    session_dir = log_path.parent
    project_dir = session_dir.parent.name
    try:
        size = log_path.stat().st_size
    except FileNotFoundError:
        raise SessionAccessError("file vanished while reading", path=log_path) from None
    return SessionSummary(
        id=log.session_id,
        path=log_path,
        project=decode_project_key(project_dir),
        cwd=log.header.get("cwd"),
        title=title,
        created=log.header["createdAt"],
        last_event_time=last_time,
        turns=turns,
        events=count,
        size=size,
        locked=is_locked_by_dsh(session_dir),
        subagent=log.header.get("origin") == "subagent",
        damage=str(log.torn_tail) if log.torn_tail is not None else None,
        warnings=tuple(log.warnings),
    )


ID_PREFIX = "session-"


def resolve_session(arg: str | Path, data_dir: Path) -> Path:
    """The log file for a SESSION argument: a log file, a session dir, or a session id (or a
    unique prefix of one, with or without ``session-``) looked up under ``data_dir``.

    An id is matched against the session dirs' names first (DSH names a dir after its
    session), then against the ids in the logs' headers (a copied or renamed dir)."""
    path = Path(arg).expanduser()
    if os.path.lexists(path):
        logs = find_session_logs([path])
        if len(logs) != 1:
            raise SessionAccessError(
                f"expected one session here, found {len(logs)}; name a session directory",
                path=path,
            )
        return logs[0]
    name = str(arg)
    if not data_dir.is_dir():
        raise SessionAccessError(
            f"no such file, and no data directory to look up session {name!r} in", path=data_dir
        )
    logs = _logs_under(data_dir)
    found = _match_id(name, [(log, log.parent.name) for log in logs])
    if found is None:
        found = _match_id(name, [(log, _header_id(log)) for log in logs])
    if found is None:
        raise SessionAccessError(f"no session {name!r} in this data directory", path=data_dir)
    if len(found) > 1:
        raise SessionAccessError(
            f"session {name!r} is ambiguous ({len(found)} matches); give more of the id",
            path=data_dir,
        )
    return found[0]


def _match_id(name: str, candidates: list[tuple[Path, str]]) -> list[Path] | None:
    """The logs whose id is ``name`` (then: starts with it), or None when none is."""
    wanted = name if name.startswith(ID_PREFIX) else ID_PREFIX + name
    for test in (
        lambda ident: ident in (name, wanted),
        lambda ident: ident.startswith(name) or ident.startswith(wanted),
    ):
        hits = [log for log, ident in candidates if ident and test(ident)]
        if hits:
            return hits
    return None


def _header_id(log: Path) -> str:
    try:
        return str(open_log(log).header.get("id", ""))
    except SessionError:
        return ""  # an unreadable log is reported when it is named, not while searching


def short_ids(ids: Iterable[str], least: int = 8) -> dict[str, str]:
    """Each id shortened to the shortest prefix, without ``session-`` and at least ``least``
    chars, that no other id in ``ids`` shares: what a narrow table shows and every command
    accepts back."""
    bare = {ident: ident.removeprefix(ID_PREFIX) for ident in ids}
    ordered = sorted(set(bare.values()))
    position = {core: at for at, core in enumerate(ordered)}
    out = {}
    for ident, core in bare.items():
        at = position[core]
        length = least
        # in sorted order, the longest prefix shared with any id is shared with a neighbour
        neighbours = ordered[max(at - 1, 0) : at] + ordered[at + 1 : at + 2]
        for other in neighbours:
            common = next(
                (i for i, (a, b) in enumerate(zip(core, other, strict=False)) if a != b),
                min(len(core), len(other)),
            )
            length = max(length, common + 1)
        out[ident] = core[:length]
    return out
