"""Writing a session log safely: temp file beside the original, verify, atomic replace.

Untouched zstd frames are copied byte for byte; changed or new batches are encoded as fresh
frames with DSH's own flags. The original is only replaced after ``verify`` accepted the temp
file; on any failure the temp file is removed and the original is untouched. The new file
keeps the original's mode (and owner, where the process may set it).

Every temp file is named for its operation (``.<name>.looprescue-<pid>-<token>.tmp``), so two
operations never share one, and one left behind by a killed process is recognisable:
``remove_stale_temps`` deletes those the next edit of the same file finds.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from looprescue.dsh.errors import SessionAccessError
from looprescue.dsh.frames import compress_frame

LOG_FILE_MODE = 0o600  # what DSH gives a new log (FORMAT.md §1.4)
_COPY_BLOCK = 1 << 20
_TEMP = re.compile(r"\.(?P<name>.+)\.looprescue-(?P<pid>\d+)(?:-[0-9a-f]+)?\.tmp")


def temp_path_for(target: Path) -> Path:
    """A fresh temp file name beside ``target``, unique to this operation."""
    token = secrets.token_hex(4)
    return target.parent / f".{target.name}.looprescue-{os.getpid()}-{token}.tmp"


def create_temp(target: Path, like: Path | None = None) -> tuple[Path, int]:
    """Create the temp file for ``target`` (exclusively) with the mode and owner of ``like``
    (default: ``target``; mode 0600 when neither exists). Returns its path and descriptor."""
    temp = temp_path_for(target)
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, LOG_FILE_MODE)
    except OSError as err:
        raise SessionAccessError(
            f"cannot create a temp file beside the log: {err.strerror or err}", path=temp
        ) from None
    try:
        _copy_mode(fd, like if like is not None else target)
    except BaseException:
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise
    return temp, fd


def _copy_mode(fd: int, model: Path) -> None:
    try:
        st = os.stat(model)
    except OSError:
        return  # nothing to copy from: keep DSH's 0600
    with contextlib.suppress(PermissionError):
        if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
            os.fchown(fd, st.st_uid, st.st_gid)
    os.fchmod(fd, st.st_mode & 0o7777)


def remove_stale_temps(target: Path, *, any_owner: bool) -> list[Path]:
    """Delete temp files of ``target`` that earlier operations left behind (a kill, a power
    cut). With ``any_owner`` (the caller holds the session lock, so no other editor can be at
    work) all of them; otherwise only those whose process is gone. Returns what was removed."""
    removed = []
    try:
        names = os.listdir(target.parent)
    except OSError:
        return removed
    for name in names:
        match = _TEMP.fullmatch(name)
        legacy_backup_temp = name == f".{target.name}.tmp"
        if not legacy_backup_temp and (match is None or match["name"] != target.name):
            continue
        if not legacy_backup_temp and not any_owner and _alive(int(match["pid"])):  # type: ignore[index]
            continue
        path = target.parent / name
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            path.unlink()
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # ours, from an earlier operation of this process: finished or failed
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LogWriter:
    """Build the replacement for ``target`` in a temp file in the same directory."""

    def __init__(self, target: Path, encoding: str) -> None:
        self.target = Path(target)
        self.encoding = encoding
        self.temp, fd = create_temp(self.target)
        self._fh = os.fdopen(fd, "wb")
        self.bytes_written = 0

    def copy_frame(self, raw: bytes) -> None:
        """Append an existing compressed frame verbatim (zstd logs only)."""
        if self.encoding != "zstd":
            raise ValueError("copy_frame is only for zstd logs")
        self._write(raw)

    def copy_bytes(self, source: BinaryIO, length: int) -> None:
        """Append the next ``length`` bytes of ``source`` verbatim (whole frames or lines)."""
        left = length
        while left > 0:
            block = source.read(min(_COPY_BLOCK, left))
            if not block:
                raise SessionAccessError(
                    "the log got shorter while it was copied", path=self.target
                )
            self._write(block)
            left -= len(block)

    def write_batch(self, lines: list[bytes]) -> None:
        """Append lines (without newlines) as one new frame, or plainly for a .jsonl log."""
        if not lines:
            return
        payload = b"".join(line + b"\n" for line in lines)
        self._write(compress_frame(payload) if self.encoding == "zstd" else payload)

    def _write(self, data: bytes) -> None:
        try:
            self._fh.write(data)
        except OSError as err:
            raise SessionAccessError(
                f"cannot write the temp file: {err.strerror or err}", path=self.temp
            ) from None
        self.bytes_written += len(data)

    def commit(self, verify: Callable[[Path], None], before_replace: Callable[[], None]) -> None:
        """Flush and fsync the temp file, ``verify(temp)``, ``before_replace()`` (last checks,
        e.g. the original did not change meanwhile), then atomically rename over the target."""
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            verify(self.temp)
            before_replace()
            os.replace(self.temp, self.target)
        except OSError as err:  # a full disk, a read-only mount: said, not a crash
            self.abort()
            raise SessionAccessError(
                f"cannot write the new log: {err.strerror or err}", path=self.target
            ) from None
        except BaseException:
            self.abort()
            raise
        _fsync_dir(self.target.parent)

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self._fh.close()
        with contextlib.suppress(FileNotFoundError):
            self.temp.unlink()


def replace_with_copy(source: Path, target: Path, verify: Callable[[Path], None]) -> None:
    """Atomically replace ``target`` with a copy of ``source`` (used by undo); the result
    keeps the mode of the file it replaces (of ``source`` if ``target`` is gone)."""
    like = target if os.path.exists(target) else source
    temp, fd = create_temp(target, like)
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out, _COPY_BLOCK)
            out.flush()
            os.fsync(out.fileno())
        verify(temp)
        os.replace(temp, target)
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        if isinstance(err, OSError):
            raise SessionAccessError(
                f"cannot write the restored log: {err.strerror or err}", path=target
            ) from None
        raise
    _fsync_dir(target.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
