"""DSH's writer lock (``session.lock``, flock) and a file-stability check (FORMAT.md §1.5)."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from looprescue.dsh.errors import SessionAccessError, SessionLockedError

try:
    import fcntl
except ImportError:  # Windows has no flock: reading works, editing needs --force
    fcntl = None  # type: ignore[assignment]

CAN_LOCK = fcntl is not None
LOCK_FILE_NAME = "session.lock"
# Without flock nobody can tell whether DSH is writing a session, so an edit is refused unless
# the user says DSH is closed (--force).
NO_LOCKING = (
    "this platform cannot lock files (no fcntl), so looprescue cannot tell whether DSH is "
    "writing this session; close DSH, then pass --force to edit it without the lock"
)


def is_locked_by_dsh(session_dir: Path) -> bool:
    """True while some process (normally DSH) holds ``session.lock``. Never creates the file."""
    if fcntl is None:
        return False  # cannot tell; an edit refuses on its own (NO_LOCKING)
    lock_path = Path(session_dir) / LOCK_FILE_NAME
    try:
        # a FIFO here must not block us
        fd = os.open(lock_path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return False
    except OSError:
        # Unreadable lock file: we cannot tell, so report it as held (the safe answer).
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        # held (EWOULDBLOCK), or the file system cannot lock at all: both are "maybe live"
        return True
    finally:
        os.close(fd)  # closing also drops our probe lock
    return False


class SessionLock:
    """Hold ``session.lock`` exclusively (as DSH does) while editing; DSH cannot open it then."""

    def __init__(self, session_dir: Path) -> None:
        self.path = Path(session_dir) / LOCK_FILE_NAME
        self._fd: int | None = None

    def acquire(self) -> SessionLock:
        if fcntl is None:
            raise SessionLockedError(NO_LOCKING, path=self.path)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o644)
        except OSError as err:
            raise SessionAccessError(
                f"cannot open the lock file: {err.strerror or err}", path=self.path
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise SessionAccessError("the lock file is not a regular file", path=self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if not isinstance(err, BlockingIOError):
                raise SessionAccessError(
                    f"cannot lock the session: {err.strerror or err}", path=self.path
                ) from None
            raise SessionLockedError(
                "DSH is using this session right now (session.lock is held); close DSH first "
                "or pass --force",
                path=self.path,
            ) from None
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> SessionLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class EditLock:
    """looprescue's own lock on one session, held around an edit beside DSH's lock.

    It lives beside the session's backups, never in the session dir, and holds the pid of
    the run that edits: a second looprescue on the same session is told that another
    looprescue run holds it (not DSH), and which one."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._made: list[Path] = []  # dirs made for the lock, removed with it when empty

    def acquire(self) -> EditLock:
        if fcntl is None:
            return self  # no flock here: SessionLock refuses the edit unless forced
        try:
            missing = self.path.parent
            while not missing.exists() and missing != missing.parent:
                self._made.append(missing)
                missing = missing.parent
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o600)
        except OSError as err:
            raise SessionAccessError(
                f"cannot open looprescue's lock file: {err.strerror or err}", path=self.path
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _read_pid(fd)
            os.close(fd)
            self._made = []  # the other run's
            if not isinstance(err, BlockingIOError):
                raise SessionAccessError(
                    f"cannot lock the session: {err.strerror or err}", path=self.path
                ) from None
            who = f" (pid {holder})" if holder else ""
            raise SessionLockedError(
                f"another looprescue run{who} is editing this session right now; wait for it "
                "to finish",
                path=self.path,
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            # removed while still held, so an edit that wrote nothing leaves nothing behind; a
            # run that opened it meanwhile was refused, one that opens it later makes a new one
            with contextlib.suppress(OSError):
                self.path.unlink()
            os.close(self._fd)
            self._fd = None
        for made in self._made:  # innermost first; one that holds a backup now stays
            with contextlib.suppress(OSError):
                made.rmdir()
        self._made = []


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def file_signature(path: Path) -> tuple[int, int, int]:
    """(size, mtime_ns, inode): compared before and after reading to detect a live writer."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SessionAccessError("file vanished (moved or deleted?)", path=path) from None
    except OSError as err:
        raise SessionAccessError(f"cannot stat: {err.strerror or err}", path=path) from None
    return st.st_size, st.st_mtime_ns, st.st_ino
