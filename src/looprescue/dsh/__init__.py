"""Reading DSH session logs (v4 multi-frame zstd or plain JSONL, and the legacy v0 layout).

Public API::

    from looprescue.dsh import open_log, find_session_logs, SessionFormatError

``open_log(path).events()`` streams checked event dicts with bounded memory (``records()``
adds each event's line and typed view); ``find_session_logs(paths)`` expands files, session
dirs and data dirs into log files. Every error is a ``SessionError``; ``SessionFormatError``
means the log's content is not what DSH writes.
"""

from looprescue.dsh.discovery import (
    BACKUP_DIR_NAME,
    SessionSummary,
    decode_project_key,
    find_session_logs,
    resolve_data_dir,
    resolve_session,
    session_log_in,
    summarize_session,
)
from looprescue.dsh.errors import (
    NoSessionsError,
    SessionAccessError,
    SessionChangedError,
    SessionEditError,
    SessionError,
    SessionFormatError,
    SessionLockedError,
    TornTailError,
)
from looprescue.dsh.lock import SessionLock, file_signature, is_locked_by_dsh
from looprescue.dsh.log import LOG_FILE_NAMES, Record, SessionLog, open_log
from looprescue.dsh.stream import expand_stream

__all__ = [
    "BACKUP_DIR_NAME",
    "LOG_FILE_NAMES",
    "NoSessionsError",
    "Record",
    "SessionAccessError",
    "SessionChangedError",
    "SessionEditError",
    "SessionError",
    "SessionFormatError",
    "SessionLock",
    "SessionLockedError",
    "SessionLog",
    "SessionSummary",
    "TornTailError",
    "decode_project_key",
    "expand_stream",
    "file_signature",
    "find_session_logs",
    "is_locked_by_dsh",
    "open_log",
    "resolve_data_dir",
    "resolve_session",
    "session_log_in",
    "summarize_session",
]
