"""The audit trail of what the proxy detected, cut and resumed: one log line per record, and
an opt-in JSONL audit log with the whole record.

One record per engine audit record (detection, cut, resume, deferred_prune, resume_failed,
history), with the request's conversation, protocol, model and timings. Each goes to the
``looprescue.events`` logger at INFO as one line (its rule, chars and conversation; no loop
text), and, when ``proxy.auditLog`` names a file, whole to that file: the raw looping text is
kept there (and only there) so a removal can be reviewed. Request headers are never written:
they carry keys. The file is opened again when it was moved or deleted (log rotation), so
lines never go to a file nobody reads.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("looprescue.proxy")
events = logging.getLogger("looprescue.events")

# What a log line takes from a record: small facts, never the text itself.
_LOGGED_FIELDS = (
    "rule",
    "channel",
    "action",
    "attempt",
    "chars_pruned",
    "kept_chars",
    "leaked_loop_chars",
    "kept_reasoning_chars",
    "kept_text_chars",
    "removed_chars",
    "reason",
    "mode",
    "conversation",
    "protocol",
    "model",
    "elapsed_ms",
)


class AuditLog:
    """Logs every record, and appends it to ``path`` when given (created with its parent
    directory, mode 0600)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path else None
        self._lock = threading.Lock()
        self._handle: Any = None
        self._identity: tuple[int, int] | None = None  # device and inode of the open file
        self._failed = False

    def _open(self) -> Any:
        assert self.path is not None
        if self._handle is not None and not self._same_file():
            self._handle.close()  # rotated away: the next line starts the new file
            self._handle = None
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.touch(mode=0o600, exist_ok=True)
            self._handle = self.path.open("ab")
            stat = os.fstat(self._handle.fileno())
            self._identity = (stat.st_dev, stat.st_ino)
        return self._handle

    def _same_file(self) -> bool:
        """The path still names the file that is open (one stat per record: records are
        rare, a few per rescued response)."""
        assert self.path is not None
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return False
        return (stat.st_dev, stat.st_ino) == self._identity

    def write(self, kind: str, data: Mapping[str, Any], context: Mapping[str, Any]) -> None:
        if events.isEnabledFor(logging.INFO):
            merged = {**data, **context}  # the request's conversation over the record's own
            facts = {k: v for k in _LOGGED_FIELDS if (v := merged.get(k)) not in (None, "")}
            text = " ".join(f"{k}={_short(v)}" for k, v in facts.items())
            events.info("%s %s", kind, text, extra={"event": kind, "fields": facts})
        if self.path is None:
            return
        record = {
            "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "kind": kind,
            **context,
            **data,
        }
        line = orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS) + b"\n"
        with self._lock:
            try:
                handle = self._open()
                handle.write(line)
                handle.flush()
            except OSError as err:
                # The audit log must never break a client's response; say so once.
                if not self._failed:
                    log.error("audit log %s: cannot write: %s", self.path, err)
                    self._failed = True

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None


def _short(value: Any) -> str:
    text = str(value)
    text = text if len(text) <= 80 else text[:79] + "…"
    return text if text and " " not in text else repr(text)


class RequestClock:
    """Timings of one client request: whole milliseconds for audit records, seconds for the
    metrics' histograms (a first byte often comes within a millisecond)."""

    def __init__(self) -> None:
        self._start = time.monotonic()

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self._start) * 1000)

    def elapsed_s(self) -> float:
        return time.monotonic() - self._start

    def seconds_at(self, monotonic: float) -> float:
        """Seconds from the request's start to ``monotonic`` (a ``time.monotonic()`` reading)."""
        return monotonic - self._start
