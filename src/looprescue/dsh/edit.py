"""Editing a session log in place, safely (the IO side of ``clean``, ``repair`` and undo).

Order of operations: take DSH's ``session.lock`` (refuse if DSH holds it unless forced),
remove temp files an interrupted earlier edit left behind, remember the file's size, mtime and
inode, back it up, write the new log to a temp file, verify it by reading it back, check the
original did not change meanwhile, then atomically replace.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from looprescue.dsh.backup import backup_path_for, edit_lock_path, make_backup
from looprescue.dsh.decoder import Line
from looprescue.dsh.errors import (
    SessionChangedError,
    SessionEditError,
    SessionLockedError,
)
from looprescue.dsh.lines import decode_file, iter_lines, open_regular
from looprescue.dsh.lock import (
    CAN_LOCK,
    EditLock,
    SessionLock,
    file_signature,
    is_locked_by_dsh,
)
from looprescue.dsh.log import SessionLog, open_log
from looprescue.dsh.prune import stream_problems
from looprescue.dsh.writer import LogWriter, remove_stale_temps


def encode_event(event: dict) -> bytes:
    """One log line the way DSH writes it: compact JSON, non-ASCII unescaped, key order kept."""
    text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates cannot be raw UTF-8; escaped JSON is still the same value.
        return json.dumps(event, ensure_ascii=True, separators=(",", ":")).encode("ascii")


class SessionEditor:
    """Context manager guarding one edit of one log file."""

    def __init__(
        self,
        log_path: Path,
        *,
        data_dir: Path | None = None,
        force: bool = False,
        warn: Callable[[str], None] = lambda message: None,
        keep_backups: int | None = None,
    ) -> None:
        self.log_path = Path(log_path)
        self.data_dir = data_dir
        self.force = force
        self.warn = warn
        self.keep_backups = keep_backups
        self._lock: SessionLock | None = None
        self._own_lock: EditLock | None = None
        self._signature: tuple[int, int, int] | None = None
        self.backup_path: Path | None = None

    def __enter__(self) -> SessionEditor:
        session_dir = self.log_path.parent
        # another looprescue first: --force is about DSH, never about two edits at once
        self._own_lock = EditLock(edit_lock_path(self.log_path, self.data_dir)).acquire()
        try:
            self._lock = SessionLock(session_dir).acquire()
        except SessionLockedError:
            if not self.force:
                self._own_lock.release()
                raise
            if CAN_LOCK:
                self.warn(
                    f"warning: DSH holds {session_dir / 'session.lock'}; editing anyway "
                    "(--force). A running DSH may overwrite or append to the edited log."
                )
            else:
                self.warn("warning: editing without DSH's lock (--force; no flock here)")
        # Temp files of earlier edits that were killed: with the lock held nobody else can be
        # writing one, so all of them are stale.
        held = self._lock is not None
        backup = backup_path_for(self.log_path, self.data_dir)
        for stale in remove_stale_temps(self.log_path, any_owner=held) + remove_stale_temps(
            backup, any_owner=held
        ):
            self.warn(f"removed a temp file an interrupted run left behind: {stale}")
        self._signature = file_signature(self.log_path)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            self._lock.release()
        if self._own_lock is not None:
            self._own_lock.release()

    def check_unchanged(self) -> None:
        """Refuse if the log changed since we started (a live writer we could not lock out)."""
        if file_signature(self.log_path) != self._signature:
            raise SessionChangedError(
                "the log changed while it was being edited (is DSH running?); nothing was written",
                path=self.log_path,
            )

    def backup(self) -> Path:
        self.check_unchanged()
        self.backup_path = make_backup(
            self.log_path, backup_path_for(self.log_path, self.data_dir), keep=self.keep_backups
        )
        return self.backup_path

    def writer(self, encoding: str) -> LogWriter:
        return LogWriter(self.log_path, encoding)

    def commit(self, writer: LogWriter, verify: Callable[[Path], None]) -> None:
        writer.commit(verify, self.check_unchanged)


def rewrite_lines(log: SessionLog, replacements: dict[int, bytes], writer: LogWriter) -> None:
    """Copy ``log`` into ``writer`` replacing the lines numbered in ``replacements``.

    zstd: frames are taken in runs that end on a line boundary (normally one frame each; a
    line DSH never splits may still run across frames). A run without replaced lines is copied
    byte for byte; a run with one is re-encoded as one frame holding the same lines, so the
    batching DSH chose is kept. A torn end raises TornTailError (``repair`` first).
    """
    if log.encoding == "plain":
        for line in iter_lines(log.path, "plain"):
            writer.write_batch([replacements.get(line.number, line.raw)])
        return
    run: list[Line] = []
    run_start = 0
    edited = False
    with open_regular(log.path) as raw_fh:
        for item in decode_file(log.path, "zstd"):
            if type(item) is Line:
                run.append(item)
                edited = edited or item.number in replacements
                continue
            if not item.at_line_boundary:  # type: ignore[union-attr]
                continue
            end = item.offset + item.size  # type: ignore[union-attr]
            if edited:
                writer.write_batch([replacements.get(x.number, x.raw) for x in run])
            else:
                raw_fh.seek(run_start)
                writer.copy_bytes(raw_fh, end - run_start)
            run, run_start, edited = [], end, False


def verify_line_edits(
    original: SessionLog, replacements: dict[int, bytes]
) -> Callable[[Path], None]:
    """A verifier for ``LogWriter.commit``: the temp file must read cleanly as a log, hold the
    replaced lines exactly, every other line byte for byte, and consistent edited streams."""

    def verify(temp: Path) -> None:
        rewritten = open_log(temp)
        if rewritten.header != original.header:
            raise SessionEditError("verification failed: header changed", path=temp)
        edited_events = {}
        for record in rewritten.records():
            if record.line is not None and record.line.number in replacements:
                edited_events[record.line.number] = record.event
        pairs = _zip_lines(
            iter_lines(original.path, original.encoding), iter_lines(temp, rewritten.encoding)
        )
        for number, before, after in pairs:
            expected = replacements.get(number, before)
            if after != expected:
                raise SessionEditError(
                    "verification failed: rewritten line differs from the plan",
                    path=temp,
                    line=number,
                )
        for number, event in edited_events.items():
            if event["type"] == "assistant/message":
                problems = stream_problems(event)
                if problems:
                    raise SessionEditError(
                        f"verification failed: {problems[0]}", path=temp, line=number
                    )

    return verify


def _zip_lines(a: Iterator, b: Iterator) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    sentinel = object()
    while True:
        x = next(a, sentinel)
        y = next(b, sentinel)
        if x is sentinel and y is sentinel:
            return
        if x is sentinel or y is sentinel:
            number = (y if x is sentinel else x).number
            yield number, None if x is sentinel else x.raw, None if y is sentinel else y.raw
            return
        yield x.number, x.raw, y.raw


def ensure_editable(log: SessionLog) -> None:
    if log.is_legacy:
        raise SessionEditError(
            "legacy version-0 logs are read-only (DSH 0.2.1 does not write them)", path=log.path
        )


__all__ = [
    "SessionEditor",
    "encode_event",
    "ensure_editable",
    "is_locked_by_dsh",
    "rewrite_lines",
    "verify_line_edits",
]
