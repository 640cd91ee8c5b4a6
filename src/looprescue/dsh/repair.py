"""Repairing a log whose tail a crash left unreadable (torn frame, truncated last line).

The log is read once through the decoder. Everything up to the end of the last complete frame
that ends on a line boundary (a plain log: the last complete line) is kept byte for byte;
complete, valid lines after that point (from a torn final frame, or from frames a line runs
across) are salvaged into one fresh frame; then, if the last turn is open, DSH's own
interrupted closers are appended in one more frame. Damage that is not at the tail (a bad frame
followed by good ones, an invalid line inside a complete frame, a seq gap) is reported, never
"repaired" by dropping data.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from looprescue.dsh.closers import OpenTurnTracker
from looprescue.dsh.decoder import Frame, Line, LogDecoder, TornTail, intact_frame_in
from looprescue.dsh.edit import encode_event
from looprescue.dsh.errors import SessionEditError, SessionFormatError
from looprescue.dsh.lines import open_regular, read_chunks
from looprescue.dsh.log import SessionLog, open_log
from looprescue.dsh.records import RecordReader
from looprescue.dsh.writer import LogWriter


@dataclass
class RepairPlan:
    log: SessionLog
    damage: str | None = None  # what was wrong at the tail, None if the tail was intact
    keep_bytes: int = 0  # leading bytes of the file kept verbatim
    keep_lines: int = 0  # lines (header included) in those bytes
    salvaged: list[bytes] = field(default_factory=list)  # complete valid lines after them
    dropped_bytes: int = 0
    closers: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def needed(self) -> bool:
        return self.damage is not None or bool(self.closers)

    def describe(self) -> list[str]:
        lines = []
        if self.damage:
            lines.append(f"damage: {self.damage}")
            lines.append(
                f"keep {self.keep_lines - 1} events byte for byte, salvage "
                f"{len(self.salvaged)} complete line(s), drop {self.dropped_bytes} byte(s)"
            )
        if self.closers:
            kinds = ", ".join(
                f"{c['type']}"
                + (f" {{{c['data']['reason']['kind']}}}" if c["type"] == "turn/end" else "")
                for c in self.closers
            )
            lines.append(f"append closers (the last turn is open): {kinds}")
        if not lines:
            lines.append("nothing to repair: the log is intact and its last turn is closed")
        return lines


class _Reading:
    """The state of one pass: what is kept, what may be salvaged, the open turn."""

    def __init__(self, log: SessionLog) -> None:
        self.reader = RecordReader(log.path, log.reader().expected_version)
        self.tracker = OpenTurnTracker()
        self.keep_bytes = 0
        self.keep_lines = 0
        self.pending: list[bytes] = []  # valid lines after the kept bytes
        self.plain = log.encoding == "plain"

    def line(self, line: Line) -> None:
        for record in self.reader.feed(line):
            self.tracker.observe(record)
        if self.plain:
            self.keep_bytes = line.offset + len(line.raw) + 1
            self.keep_lines = line.number
        else:
            self.pending.append(line.raw)

    def frame(self, frame: Frame) -> None:
        if frame.at_line_boundary:
            self.keep_bytes = frame.offset + frame.size
            self.keep_lines = frame.last_line
            self.pending = []

    def salvage(self, lines: tuple[Line, ...]) -> None:
        """Complete lines of a torn frame, up to the first one that does not check."""
        for line in lines:
            try:
                records = self.reader.feed(line)
            except SessionFormatError:
                return
            for record in records:
                self.tracker.observe(record)
            self.pending.append(line.raw)


def plan_repair(path: Path) -> RepairPlan:
    """Work out what a repair would do; raises SessionFormatError for damage before the tail."""
    try:
        log = open_log(path)
    except SessionFormatError as err:
        raise _not_a_tail(err) from None
    reading = _Reading(log)
    decoder = LogDecoder(log.encoding)
    corrupt: SessionFormatError | None = None
    with open_regular(path) as fh:
        for chunk in read_chunks(fh, path):
            items = decoder.feed(chunk)
            while True:
                try:
                    item = next(items, None)
                except SessionFormatError as err:
                    corrupt = err.fill(path=path, last_good_seq=reading.reader.last_seq)
                    break
                if item is None:
                    break
                try:
                    if type(item) is Line:
                        reading.line(item)
                    else:
                        reading.frame(item)  # type: ignore[arg-type]
                except SessionFormatError as err:
                    raise _not_a_tail(err) from None
            if corrupt is not None:
                break
        size = os.fstat(fh.fileno()).st_size
        plan = RepairPlan(log)
        if corrupt is not None:
            _corrupt_tail(plan, corrupt, fh)
        else:
            torn = decoder.close()
            if torn is not None:
                _torn_tail(plan, torn, reading)
    if plan.damage is None:  # intact: everything is kept, closers are appended if needed
        reading.keep_bytes, reading.keep_lines, reading.pending = size, decoder.lines_read, []
    plan.keep_lines = max(reading.keep_lines, 1)
    plan.keep_bytes = reading.keep_bytes
    plan.salvaged = reading.pending
    plan.dropped_bytes = size - reading.keep_bytes if plan.damage else 0
    plan.closers = reading.tracker.closers()
    plan.warnings = reading.reader.warnings
    return plan


def _corrupt_tail(plan: RepairPlan, err: SessionFormatError, fh) -> None:
    """A frame failed to decode. Only a repair if no intact frame follows it."""
    if err.frame in (None, 0) or err.line is not None:
        raise _not_a_tail(err)
    fh.seek((err.offset or 0) + 1)
    if intact_frame_in(fh.read()):
        raise _not_a_tail(err)
    plan.damage = f"frame {err.frame} at byte {err.offset} is corrupt and nothing intact follows"


def _torn_tail(plan: RepairPlan, torn: TornTail, reading: _Reading) -> None:
    if torn.frame is None:
        plan.damage = f"the last line (line {torn.error.line}) is cut off at the end of the log"
        return
    if torn.frame == 0:
        raise _not_a_tail(torn.error)
    reading.salvage(torn.lines)
    plan.damage = f"frame {torn.frame} at byte {torn.offset} is torn (the file ends inside it)"


def _not_a_tail(err: SessionFormatError) -> SessionFormatError:
    err.reason = (
        f"damage before the end of the log, not repairable without losing data: {err.reason}"
    )
    return err.fill()


def write_repair(plan: RepairPlan, writer: LogWriter) -> None:
    with open_regular(plan.log.path) as source:
        writer.copy_bytes(source, plan.keep_bytes)
    writer.write_batch(plan.salvaged)
    writer.write_batch([encode_event(e) for e in plan.closers])


def verify_repair(plan: RepairPlan):
    """The repaired file reads cleanly, starts with the kept bytes unchanged, holds the
    salvaged lines and the closers, and its last turn is closed."""
    expected_lines = plan.keep_lines + len(plan.salvaged) + len(plan.closers)
    kept_digest = _prefix_digest(plan.log.path, plan.keep_bytes)

    def verify(temp: Path) -> None:
        repaired = open_log(temp)
        tracker = OpenTurnTracker()
        lines = 1
        for record in repaired.records():
            tracker.observe(record)
            lines = record.line.number if record.line is not None else lines
        if lines != expected_lines:
            raise SessionEditError(
                f"verification failed: {lines} lines, expected {expected_lines}", path=temp
            )
        if tracker.turn_open:
            raise SessionEditError("verification failed: the last turn is still open", path=temp)
        if _prefix_digest(temp, plan.keep_bytes) != kept_digest:
            raise SessionEditError("verification failed: a kept byte changed", path=temp)

    return verify


def _prefix_digest(path: Path, length: int) -> str:
    digest = hashlib.blake2b(digest_size=20)
    with open_regular(path) as fh:
        left = length
        while left > 0 and (block := fh.read(min(1 << 20, left))):
            digest.update(block)
            left -= len(block)
    return digest.hexdigest()
