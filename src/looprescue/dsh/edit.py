"""Editing a session log in place, safely (the IO side of ``clean``, ``repair`` and undo).

Order of operations: take DSH's ``session.lock`` (refuse if DSH holds it unless forced),
remember the file's size/mtime/inode, back it up, write the new log to a temp file, verify it
by reading it back, check the original did not change meanwhile, then atomically replace.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from looprescue.dsh.backup import backup_path_for, make_backup
from looprescue.dsh.errors import SessionFormatError, SessionLockedError
from looprescue.dsh.frames import iter_frames
from looprescue.dsh.lines import iter_lines
from looprescue.dsh.lock import SessionLock, file_signature, is_locked_by_dsh
from looprescue.dsh.log import SessionLog, open_log
from looprescue.dsh.prune import stream_problems
from looprescue.dsh.writer import LogWriter


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
    ) -> None:
        self.log_path = Path(log_path)
        self.data_dir = data_dir
        self.force = force
        self.warn = warn
        self._lock: SessionLock | None = None
        self._signature: tuple[int, int, int] | None = None
        self.backup_path: Path | None = None

    def __enter__(self) -> SessionEditor:
        session_dir = self.log_path.parent
        try:
            self._lock = SessionLock(session_dir).acquire()
        except SessionLockedError:
            if not self.force:
                raise
            self.warn(
                f"warning: DSH holds {session_dir / 'session.lock'}; editing anyway (--force). "
                "A running DSH may overwrite or append to the edited log."
            )
        self._signature = file_signature(self.log_path)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            self._lock.release()

    def check_unchanged(self) -> None:
        """Refuse if the log changed since we started (a live writer we could not lock out)."""
        if file_signature(self.log_path) != self._signature:
            raise SessionFormatError(
                "the log changed while it was being edited (is DSH running?); nothing was written",
                path=self.log_path,
            )

    def backup(self) -> Path:
        self.check_unchanged()
        self.backup_path = make_backup(self.log_path, backup_path_for(self.log_path, self.data_dir))
        return self.backup_path

    def writer(self, encoding: str) -> LogWriter:
        return LogWriter(self.log_path, encoding)

    def commit(self, writer: LogWriter, verify: Callable[[Path], None]) -> None:
        writer.commit(verify, self.check_unchanged)


def rewrite_lines(log: SessionLog, replacements: dict[int, bytes], writer: LogWriter) -> None:
    """Copy ``log`` into ``writer`` replacing the lines numbered in ``replacements``.

    zstd: a frame without replaced lines is copied byte for byte; a frame with one is
    re-encoded holding the same lines (so the batching DSH chose is kept).
    """
    if log.encoding == "plain":
        for line in iter_lines(log.path, "plain"):
            writer.write_batch([replacements.get(line.number, line.raw)])
        return
    number = 0
    with open(log.path, "rb") as raw_fh:
        for frame in iter_frames(log.path):
            if not frame.complete:
                raise SessionFormatError(
                    "file ends inside a frame; run `looprescue repair` first",
                    path=log.path,
                    frame=frame.index,
                    offset=frame.offset,
                )
            if not frame.content.endswith(b"\n"):
                raise SessionFormatError(
                    "frame ends inside a line; cannot edit it safely",
                    path=log.path,
                    frame=frame.index,
                    offset=frame.offset,
                )
            lines = frame.content[:-1].split(b"\n")
            numbers = range(number + 1, number + 1 + len(lines))
            number += len(lines)
            if any(n in replacements for n in numbers):
                writer.write_batch(
                    [replacements.get(n, raw) for n, raw in zip(numbers, lines, strict=True)]
                )
            else:
                writer.copy_frame(os.pread(raw_fh.fileno(), frame.size, frame.offset))


def verify_line_edits(
    original: SessionLog, replacements: dict[int, bytes]
) -> Callable[[Path], None]:
    """A verifier for ``LogWriter.commit``: the temp file must read cleanly as a log, hold the
    replaced lines exactly, every other line byte for byte, and consistent edited streams."""

    def verify(temp: Path) -> None:
        rewritten = open_log(temp)
        if rewritten.header != original.header:
            raise SessionFormatError("verification failed: header changed", path=temp)
        edited_events = {}
        for record in rewritten.records():
            if record.line.number in replacements:
                edited_events[record.line.number] = record.event
        pairs = _zip_lines(
            iter_lines(original.path, original.encoding), iter_lines(temp, rewritten.encoding)
        )
        for number, before, after in pairs:
            expected = replacements.get(number, before)
            if after != expected:
                raise SessionFormatError(
                    "verification failed: rewritten line differs from the plan",
                    path=temp,
                    line=number,
                )
        for number, event in edited_events.items():
            if event["type"] == "assistant/message":
                problems = stream_problems(event)
                if problems:
                    raise SessionFormatError(
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
        raise SessionFormatError(
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
