"""Opt-in JSONL audit log of what the proxy detected, cut and resumed.

One line per engine audit record (detection, cut, resume, deferred_prune, resume_failed), with
the request's conversation, protocol, model and timings. The raw looping text is kept here (and
only here) so a removal can be reviewed. Request headers are never written: they carry keys.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("looprescue.proxy")


class AuditLog:
    """Appends records to ``path`` (created with its parent directory, mode 0600)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._handle: Any = None
        self._failed = False

    def _open(self) -> Any:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.touch(mode=0o600, exist_ok=True)
            self._handle = self.path.open("ab")
        return self._handle

    def write(self, kind: str, data: Mapping[str, Any], context: Mapping[str, Any]) -> None:
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
