"""From lines to checked records: the header, then each event with its typed view. Pure.

``RecordReader.feed(line)`` takes the decoder's lines in order and applies the rules DSH
enforces on load (header, envelope, contiguous seqs; FORMAT.md §3, §4) and the typed views
(views.py). A broken rule raises ``SessionFormatError`` naming the file, frame, byte offset,
line, field and the last good seq; what DSH would tolerate becomes a warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from looprescue.dsh.decoder import Line
from looprescue.dsh.envelope import EnvelopeProblem, check_envelope, check_header, parse_json_line
from looprescue.dsh.errors import SessionFormatError
from looprescue.dsh.legacy import expand_packed_row, is_packed_row
from looprescue.dsh.views import FieldProblem, view_event

MAX_WARNINGS = 50  # kept per pass; the rest are only counted


class Record(NamedTuple):
    """One event, the line it came from (legacy packed rows give several records per line)
    and its typed view (None for an event type looprescue does not read). ``skipped``: a
    log-only event with a bad field, warned about; readers of facts leave it out."""

    event: dict
    line: Line | None = None
    view: Any = None
    skipped: bool = False

    @property
    def type(self) -> str:
        return self.event["type"]

    @property
    def seq(self) -> int:
        return self.event["seq"]


def record_of(event: dict) -> Record:
    """A record for an event built in memory (tests, closers): viewed the same way, a bad
    field of a strict family raises FieldProblem."""
    viewed = view_event(event["type"], event.get("data"))
    if viewed.problem is not None and viewed.fatal:
        raise viewed.problem
    return Record(event, None, viewed.view, viewed.view is None and viewed.problem is not None)


class Warnings(list):
    """Warnings of one pass over a log (at most ``MAX_WARNINGS``; ``dropped`` counts the
    rest)."""

    dropped = 0

    def add(self, text: str) -> None:
        if len(self) < MAX_WARNINGS:
            self.append(text)
        else:
            self.dropped += 1


class RecordReader:
    """Lines of one log in, checked records out. ``expected_version``: the header version the
    file name implies (None: any supported one)."""

    def __init__(self, path: Path | None = None, expected_version: int | None = None) -> None:
        self.path = path
        self.expected_version = expected_version
        self.header: dict | None = None
        self.version: int | None = None
        self.last_seq: int | None = None
        self.warnings = Warnings()
        self._expected_seq = 0

    @property
    def is_legacy(self) -> bool:
        return self.version == 0

    def feed(self, line: Line) -> list[Record]:
        """The records of one line (none for the header line)."""
        try:
            value = parse_json_line(line.raw)
            if self.header is None:
                self.version = check_header(value, self.expected_version)
                self.header = value
                return []
            legacy = self.version == 0
            if legacy and is_packed_row(value):
                events = list(expand_packed_row(value, self._expected_seq))
            else:
                warnings = check_envelope(value, self._expected_seq, strict_surface=not legacy)
                for warning in warnings:
                    self.warnings.add(f"{_where(line)}: {warning}")
                record = self._view(value, line)  # the common case: one event per line
                self._expected_seq = value["seq"] + 1
                self.last_seq = value["seq"]
                return [record]
        except EnvelopeProblem as problem:
            raise self.error(str(problem), line) from None
        records = []
        for event in events:
            records.append(self._view(event, line))
            self._expected_seq = event["seq"] + 1
            self.last_seq = event["seq"]
        return records

    def _view(self, event: dict, line: Line) -> Record:
        viewed = view_event(event["type"], event["data"])
        if viewed.problem is None:
            return Record(event, line, viewed.view)
        what = f"{event['type']} (seq {event['seq']}): {viewed.problem}"
        if viewed.fatal:
            raise self.error(what, line)
        if viewed.view is not None:  # a message whose log-only stream is unreadable
            self.warnings.add(
                f"{_where(line)}: {what}; the stream is ignored (DSH replays the message "
                "from its content)"
            )
            return Record(event, line, viewed.view)
        self.warnings.add(f"{_where(line)}: {what}; event skipped (log-only, not replayed)")
        return Record(event, line, None, skipped=True)

    def error(self, reason: str, line: Line) -> SessionFormatError:
        return SessionFormatError(
            reason,
            path=self.path,
            frame=line.frame,
            offset=line.position,
            line=line.number,
            last_good_seq=self.last_seq,
        )


def _where(line: Line) -> str:
    parts = [f"frame {line.frame}"] if line.frame is not None else []
    parts.append(f"line {line.number}")
    return ", ".join(parts)


__all__ = ["FieldProblem", "Record", "RecordReader", "record_of"]
