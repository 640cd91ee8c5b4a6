"""Following a live session log while DSH appends to it (`looprescue doctor --follow`).

The thin file adapter around the one log decoder (`looprescue.dsh.decoder`, pure: only
complete zstd frames are decoded, a frame or line still being written waits for the next
poll) and the record reader (header, envelope, contiguous seqs, typed views, exactly as for a
finished log). `SessionTail` polls for new bytes and notices when the file was truncated,
rotated, rewritten, removed or replaced by something that is not a regular file, so the
caller can report it and start over.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looprescue.dsh.decoder import Line, LogDecoder
from looprescue.dsh.errors import SessionAccessError, SessionFormatError
from looprescue.dsh.lines import open_regular
from looprescue.dsh.log import LOG_FILE_NAMES
from looprescue.dsh.records import RecordReader

_READ_SIZE = 1 << 20
POLL_BYTES = 4 << 20  # per poll, so a long existing log is taken in bounded bites
_FINGERPRINT_BYTES = 4096  # the file's start (header frame first): changes only on a rewrite

__all__ = ["LogDecoder", "SessionTail", "TailUpdate"]


@dataclass
class TailUpdate:
    """What one poll found. ``restarted``: the file changed under us; the caller discards what
    it built from the old content. ``header`` is set when the header line was read."""

    header: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    restarted: bool = False
    more: bool = False  # stopped at the byte budget: poll again right away


class SessionTail:
    """Polls one session log file for appended events."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file_id: tuple[int, int] | None = None
        self._missing_reported: str | None = None  # what was said about the path being gone
        self._reset()
        try:
            open_regular(self.path).close()
        except SessionAccessError as err:
            raise SessionAccessError(
                f"no such session log file: {err.reason}", path=self.path
            ) from None

    def _reset(self) -> None:
        self._offset = 0
        self._fingerprint = b""
        # named like a zstd log: read as one, so a damaged start is a corrupt frame
        self._decoder = LogDecoder("zstd" if self.path.name.endswith(".zstd") else None)
        self._reader = RecordReader(self.path, LOG_FILE_NAMES.get(self.path.name))
        self._warned = 0
        self.header: dict[str, Any] | None = None

    def poll(self, max_bytes: int = POLL_BYTES) -> TailUpdate:
        """New events since the last poll, reading at most about ``max_bytes`` of the file."""
        update = TailUpdate()
        try:
            fh = open_regular(self.path)
        except SessionAccessError as err:
            self._gone(update, err)
            return update
        with fh:
            stat = os.fstat(fh.fileno())
            self._check_same_file(fh, stat, update)
            self._missing_reported = None
            fh.seek(self._offset)
            budget = max_bytes
            while budget > 0 and (chunk := fh.read(min(_READ_SIZE, budget))):
                budget -= len(chunk)
                self._offset += len(chunk)
                if len(self._fingerprint) < _FINGERPRINT_BYTES:
                    self._fingerprint += chunk[: _FINGERPRINT_BYTES - len(self._fingerprint)]
                self._take(chunk, update)
            update.more = self._offset < os.fstat(fh.fileno()).st_size
        return update

    def _gone(self, update: TailUpdate, err: SessionAccessError) -> None:
        """The path is missing or no longer a regular file: say so once (and again when that
        changes, a removed log that comes back as a directory), then wait."""
        if err.reason.startswith("permission denied"):
            raise err
        what = "removed" if err.reason.startswith("file not found") else err.reason
        if what != self._missing_reported:
            update.notices.append(f"{self.path}: session log {what}; waiting for it")
            self._missing_reported = what

    def _check_same_file(self, fh: Any, stat: os.stat_result, update: TailUpdate) -> None:
        file_id = (stat.st_dev, stat.st_ino)
        reason = None
        if self._missing_reported is not None:
            reason = "reappeared"
        elif self._file_id is not None and file_id != self._file_id:
            reason = "was replaced (rotated)"
        elif stat.st_size < self._offset:
            reason = f"was truncated ({self._offset} -> {stat.st_size} bytes)"
        elif self._fingerprint and fh.read(len(self._fingerprint)) != self._fingerprint:
            reason = "was rewritten in place"
        self._file_id = file_id
        if reason is not None:
            update.notices.append(f"{self.path}: session log {reason}; reading it from the start")
            update.restarted = True
            update.events.clear()
            update.header = None
            self._reset()

    def _take(self, chunk: bytes, update: TailUpdate) -> None:
        try:
            for item in self._decoder.feed(chunk):
                if type(item) is not Line:
                    continue
                for record in self._reader.feed(item):
                    if not record.skipped:
                        update.events.append(record.event)
                if self.header is None and self._reader.header is not None:
                    self.header = update.header = self._reader.header
        except SessionFormatError as err:
            raise err.fill(path=self.path, last_good_seq=self._reader.last_seq) from None
        warnings = self._reader.warnings
        update.notices.extend(f"warning: {self.path}: {w}" for w in warnings[self._warned :])
        self._warned = len(warnings)
