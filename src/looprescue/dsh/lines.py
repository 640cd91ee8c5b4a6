"""Reading a session log file through the decoder: safe opening, lines and frames.

Only regular files are ever opened for reading, without blocking: a FIFO, a device or a
symlink loop named like a session log is an error naming the file, never a hang.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from looprescue.dsh.decoder import ZSTD_MAGIC, Frame, Line, LogDecoder, encoding_of
from looprescue.dsh.errors import SessionAccessError, SessionFormatError

READ_SIZE = 1 << 18

__all__ = ["Line", "decode_file", "detect_encoding", "iter_lines", "open_regular"]


def not_regular(mode: int) -> str | None:
    """Why a file of this ``st_mode`` is not a session log file (None: it is a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, expected a session log file"
    kinds = {
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISSOCK: "a socket",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
    }
    kind = next((name for test, name in kinds.items() if test(mode)), "a special file")
    return f"not a regular file ({kind}); skipped"


def access_error(err: OSError, path: Path | str) -> SessionAccessError:
    """An OS error as a SessionAccessError that names the file."""
    if isinstance(err, FileNotFoundError):
        reason = "file not found (moved or deleted?)"
    elif isinstance(err, PermissionError):
        reason = "permission denied"
    elif isinstance(err, IsADirectoryError):
        reason = "is a directory, expected a session log file"
    elif err.errno == errno.ELOOP:
        reason = "too many levels of symbolic links (a symlink loop?)"
    else:
        reason = f"cannot open: {err.strerror or err}"
    return SessionAccessError(reason, path=path)


def open_regular(path: Path | str) -> BinaryIO:
    """Open a regular file for reading; anything else raises SessionAccessError at once.

    ``O_NONBLOCK`` keeps opening a FIFO from waiting for a writer; the type is then checked
    on the open descriptor, so a file swapped in between cannot slip through.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise access_error(err, path) from None
    try:
        why = not_regular(os.fstat(fd).st_mode)
        if why is not None:
            raise SessionAccessError(why, path=path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def detect_encoding(path: Path) -> str:
    """'zstd' or 'plain', by content (magic bytes), so a renamed copy still reads; a file
    named ``….zstd`` is always read as zstd, so damage to its first bytes is reported as the
    corrupt frame it is, not as an unreadable first line."""
    with open_regular(path) as fh:
        try:
            head = fh.read(len(ZSTD_MAGIC))
        except OSError as err:
            raise access_error(err, path) from None
    return "zstd" if Path(path).name.endswith(".zstd") else encoding_of(head)


def read_chunks(fh: BinaryIO, path: Path) -> Iterator[bytes]:
    """The rest of an open file in pieces; a read error names the file."""
    while True:
        try:
            chunk = fh.read(READ_SIZE)
        except OSError as err:
            raise access_error(err, path) from None
        if not chunk:
            return
        yield chunk


def decode_file(path: Path, encoding: str | None = None) -> Iterator[Line | Frame]:
    """Every line and frame of the file, in order. A torn end raises its TornTailError after
    the last complete item; corruption raises SessionFormatError; both name the file."""
    decoder = LogDecoder(encoding)
    with open_regular(path) as fh:
        for chunk in read_chunks(fh, path):
            try:
                yield from decoder.feed(chunk)
            except SessionFormatError as err:
                raise err.fill(path=path) from None
    torn = decoder.close()
    if torn is not None:
        raise torn.error.fill(path=path)


def iter_lines(path: Path, encoding: str | None = None) -> Iterator[Line]:
    """Yield every complete line. A torn tail raises TornTailError after the good lines."""
    for item in decode_file(path, encoding):
        if type(item) is Line:
            yield item
