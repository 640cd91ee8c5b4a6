"""Writing a session log safely: temp file beside the original, verify, atomic replace.

Untouched zstd frames are copied byte for byte; changed or new batches are encoded as fresh
frames with DSH's own flags. The original is only replaced after ``verify`` accepted the temp
file; on any failure the temp file is removed and the original is untouched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from looprescue.dsh.errors import SessionAccessError
from looprescue.dsh.frames import compress_frame

LOG_FILE_MODE = 0o600


class LogWriter:
    """Build the replacement for ``target`` in a temp file in the same directory."""

    def __init__(self, target: Path, encoding: str) -> None:
        self.target = Path(target)
        self.encoding = encoding
        self.temp = self.target.parent / f".{self.target.name}.looprescue-{os.getpid()}.tmp"
        try:
            fd = os.open(self.temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, LOG_FILE_MODE)
        except OSError as err:
            raise SessionAccessError(
                f"cannot create a temp file beside the log: {err.strerror or err}",
                path=self.temp,
            ) from None
        self._fh = os.fdopen(fd, "wb")
        self.bytes_written = 0

    def copy_frame(self, raw: bytes) -> None:
        """Append an existing compressed frame verbatim (zstd logs only)."""
        if self.encoding != "zstd":
            raise ValueError("copy_frame is only for zstd logs")
        self._write(raw)

    def write_batch(self, lines: list[bytes]) -> None:
        """Append lines (without newlines) as one new frame, or plainly for a .jsonl log."""
        if not lines:
            return
        payload = b"".join(line + b"\n" for line in lines)
        self._write(compress_frame(payload) if self.encoding == "zstd" else payload)

    def _write(self, data: bytes) -> None:
        self._fh.write(data)
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
    """Atomically replace ``target`` with a copy of ``source`` (used by undo)."""
    temp = target.parent / f".{target.name}.looprescue-{os.getpid()}.tmp"
    try:
        shutil.copyfile(source, temp)
        os.chmod(temp, LOG_FILE_MODE)
        with open(temp, "rb") as fh:
            os.fsync(fh.fileno())
        verify(temp)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
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
