"""Where the proxy's log lines go: stderr, as text or one JSON object per line.

Text lines read ``2026-01-02T03:04:05.678Z INFO looprescue.events: detection rule=cycle …``;
JSON lines carry ``time``, ``level``, ``logger`` and ``message``, an event's fields (``event``
and its facts, see ``proxy/audit.py``) as their own keys, and a traceback as ``exc``. Both are
one line per record, however narrow the terminal: log collectors (journald, docker) split on
newlines.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")


class _UtcFormatter(logging.Formatter):
    converter = time.gmtime

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", self.converter(record.created))
        return f"{stamp}.{int(record.msecs):03d}Z"


class TextFormatter(_UtcFormatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        # a traceback stays on the record's own line: one record, one line
        return super().format(record).replace("\n", "\n  ")


class JsonFormatter(_UtcFormatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        event = getattr(record, "event", None)
        if event is not None:
            line["event"] = event
            line.update(getattr(record, "fields", {}))
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


_installed: list[logging.Handler] = []


def configure(level: str = "info", fmt: str = "text") -> None:
    """Send looprescue's log records at ``level`` and above to stderr in ``fmt`` (again:
    the earlier setting is replaced)."""
    reset()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    logger = logging.getLogger("looprescue")
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    # asyncio reports what escapes a callback; it should read like the rest
    logging.getLogger("asyncio").addHandler(handler)
    _installed.append(handler)


def reset() -> None:
    """Undo :func:`configure`: looprescue's records go to the root logger's handlers again."""
    logger = logging.getLogger("looprescue")
    while _installed:
        handler = _installed.pop()
        logger.removeHandler(handler)
        logging.getLogger("asyncio").removeHandler(handler)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True
