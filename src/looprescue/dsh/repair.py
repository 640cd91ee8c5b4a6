"""Repairing a log whose tail a crash left unreadable (torn frame, truncated last line).

Every complete frame before the damage is kept byte for byte; complete, valid lines decodable
from a torn final frame are salvaged into a fresh frame; then, if the last turn is open, DSH's
own interrupted closers are appended in one more frame. Damage that is not at the tail (a bad
frame followed by good ones, an invalid line inside a complete frame) is reported, never
"repaired" by dropping data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import zstandard

from looprescue.dsh.closers import OpenTurnTracker
from looprescue.dsh.edit import encode_event
from looprescue.dsh.envelope import EnvelopeProblem, check_envelope, parse_json_line
from looprescue.dsh.errors import SessionAccessError, SessionFormatError, TornTailError
from looprescue.dsh.frames import ZSTD_MAGIC, iter_frames
from looprescue.dsh.lines import iter_lines
from looprescue.dsh.log import SessionLog, open_log
from looprescue.dsh.writer import LogWriter


@dataclass
class RepairPlan:
    log: SessionLog
    damage: str | None = None  # what was wrong at the tail, None if the tail was intact
    keep_frames: int = 0  # zstd: leading complete frames copied verbatim
    keep_lines: int = 0  # lines (header included) kept from those frames / the plain file
    salvaged: list[bytes] = field(default_factory=list)  # complete lines from a torn frame
    dropped_bytes: int = 0
    closers: list[dict] = field(default_factory=list)

    @property
    def needed(self) -> bool:
        return self.damage is not None or bool(self.closers)

    def describe(self) -> list[str]:
        lines = []
        if self.damage:
            lines.append(f"damage: {self.damage}")
            lines.append(
                f"keep {self.keep_lines - 1} events from intact frames, salvage "
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


def plan_repair(path: Path) -> RepairPlan:
    """Work out what a repair would do; raises SessionFormatError for non-tail damage."""
    try:
        log = open_log(path)
    except SessionAccessError:
        raise
    except SessionFormatError as err:
        raise _not_a_tail(err) from None
    plan = RepairPlan(log, keep_lines=1)
    tracker = OpenTurnTracker()
    last_line_in_frame: dict[int | None, int] = {}
    try:
        for record in log.records(tolerate_torn_tail=True):
            tracker.observe(record.event)
            plan.keep_lines = record.line.number
            last_line_in_frame[record.line.frame] = record.line.number
    except SessionFormatError as err:
        if err.line is not None or err.frame is None or err.frame == 0:
            raise _not_a_tail(err) from None
        _plan_corrupt_tail(plan, err)
    if log.torn_tail is not None:
        _plan_torn_tail(plan, log.torn_tail, tracker, last_line_in_frame)
    elif plan.damage is None:
        plan.keep_frames = -1  # everything
    plan.closers = tracker.closers()
    return plan


def _not_a_tail(err: SessionFormatError) -> SessionFormatError:
    err.reason = (
        f"damage before the end of the log, not repairable without losing data: {err.reason}"
    )
    return err.fill()


def _plan_corrupt_tail(plan: RepairPlan, err: SessionFormatError) -> None:
    """A frame failed to decode. Only a repair if no intact frame follows it."""
    path = plan.log.path
    size = path.stat().st_size
    if _intact_frame_after(path, err.offset + 1):
        raise _not_a_tail(err)
    plan.damage = f"frame {err.frame} at byte {err.offset} is corrupt and nothing intact follows"
    plan.keep_frames = err.frame
    plan.dropped_bytes = size - err.offset


def _intact_frame_after(path: Path, start: int) -> bool:
    with open(path, "rb") as fh:
        fh.seek(start)
        rest = fh.read()
    position = rest.find(ZSTD_MAGIC)
    while position >= 0:
        decoder = zstandard.ZstdDecompressor().decompressobj()
        try:
            decoder.decompress(rest[position:])
            if decoder.eof:
                return True
        except zstandard.ZstdError:
            pass
        position = rest.find(ZSTD_MAGIC, position + 1)
    return False


def _plan_torn_tail(
    plan: RepairPlan,
    torn: TornTailError,
    tracker: OpenTurnTracker,
    last_line_in_frame: dict[int | None, int],
) -> None:
    log = plan.log
    size = log.path.stat().st_size
    if log.encoding == "plain":
        kept = sum(len(line.raw) + 1 for line in _intact_plain_lines(log.path))
        plan.damage = f"line {torn.line} is truncated (no newline at the end of the file)"
        plan.dropped_bytes = size - kept
        return
    frames = list(_frame_positions(log.path))
    # The frame the damage starts in: the torn frame, or the frame where an unterminated
    # last line begins. Frames before it are kept verbatim; its complete lines are salvaged.
    salvage = frames[torn.frame if torn.frame is not None else -1]
    plan.keep_frames = salvage.index
    already_read = plan.keep_lines
    plan.keep_lines = max(
        (n for f, n in last_line_in_frame.items() if f is not None and f < salvage.index),
        default=1,
    )
    if salvage.complete:
        plan.damage = f"the last line (line {torn.line}) is cut off at the end of the log"
    else:
        plan.damage = (
            f"frame {salvage.index} at byte {salvage.offset} is torn (the file ends inside it)"
        )
    candidates = salvage.content.split(b"\n")[:-1]
    validated = already_read - plan.keep_lines  # complete lines of this frame read before
    plan.salvaged.extend(candidates[:validated])
    expected_seq = tracker.last_seq + 1
    for raw in candidates[validated:]:
        try:
            event = parse_json_line(raw)
            check_envelope(event, expected_seq, strict_surface=True)
        except EnvelopeProblem:
            break
        plan.salvaged.append(raw)
        tracker.observe(event)
        expected_seq += 1
    plan.dropped_bytes = size - salvage.offset  # compressed bytes replaced by a new frame


def _intact_plain_lines(path: Path):
    try:
        yield from iter_lines(path, "plain")
    except TornTailError:
        return


def _frame_positions(path: Path):
    try:
        yield from iter_frames(path)
    except SessionFormatError:
        return


def write_repair(plan: RepairPlan, writer: LogWriter) -> None:
    log = plan.log
    if log.encoding == "plain":
        for line in _intact_plain_lines(log.path):
            if line.number > plan.keep_lines:
                break
            writer.write_batch([line.raw])
    else:
        with open(log.path, "rb") as raw_fh:
            for frame in _frame_positions(log.path):
                if plan.keep_frames >= 0 and frame.index >= plan.keep_frames:
                    break
                if not frame.complete:
                    break
                writer.copy_frame(os.pread(raw_fh.fileno(), frame.size, frame.offset))
        writer.write_batch(plan.salvaged)
    writer.write_batch([encode_event(e) for e in plan.closers])


def verify_repair(plan: RepairPlan):
    """The repaired file reads cleanly, keeps every kept line byte for byte, closes its turn."""
    kept_total = plan.keep_lines + len(plan.salvaged)

    def verify(temp: Path) -> None:
        repaired = open_log(temp)
        tracker = OpenTurnTracker()
        count = 0
        for event in repaired.events():
            tracker.observe(event)
            count += 1
        if count != kept_total - 1 + len(plan.closers):
            raise SessionFormatError(
                f"verification failed: {count} events, expected "
                f"{kept_total - 1 + len(plan.closers)}",
                path=temp,
            )
        if tracker.turn_open:
            raise SessionFormatError("verification failed: the last turn is still open", path=temp)
        original = _original_lines(plan)
        for before, after in zip(original, iter_lines(temp, repaired.encoding), strict=False):
            if before != after.raw:
                raise SessionFormatError(
                    "verification failed: a kept line changed", path=temp, line=after.number
                )

    return verify


def _original_lines(plan: RepairPlan):
    source = (
        _intact_plain_lines(plan.log.path)
        if plan.log.encoding == "plain"
        else _complete_frame_lines(plan)
    )
    for line in source:
        if line.number > plan.keep_lines:
            break
        yield line.raw
    yield from plan.salvaged


def _complete_frame_lines(plan: RepairPlan):
    try:
        yield from iter_lines(plan.log.path, "zstd")
    except SessionFormatError:
        return
