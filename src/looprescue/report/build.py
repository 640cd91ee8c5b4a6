"""Read session logs into :class:`SessionReport` values: two streamed passes per log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from looprescue.config import LoopRescueConfig
from looprescue.dsh import SessionAccessError, open_log
from looprescue.dsh.records import Record
from looprescue.report.session import SessionReport, fold_session

MAX_NOTES = 5


def build_session(path: Path, config: LoopRescueConfig) -> SessionReport:
    """The report of one log; raises SessionError when it cannot be read."""
    report = SessionReport(str(path))
    log = open_log(path)
    try:
        report.size = path.stat().st_size
    except OSError as err:
        raise SessionAccessError(f"cannot read: {err.strerror or err}", path=path) from None

    def second_pass() -> Iterator[Record]:
        yield from open_log(path).records(tolerate_torn_tail=True)

    fold_session(report, log.header, log.records(tolerate_torn_tail=True), second_pass(), config)
    if log.torn_tail is not None:
        report.notes.append(f"{log.torn_tail}; read up to it (as DSH would)")
    warnings = list(log.warnings)
    report.notes += warnings[:MAX_NOTES]
    if len(warnings) > MAX_NOTES or getattr(log.warnings, "dropped", 0):
        more = len(warnings) - MAX_NOTES + getattr(log.warnings, "dropped", 0)
        report.notes.append(f"{max(more, 0)} more reader warnings (see looprescue scan)")
    return report
