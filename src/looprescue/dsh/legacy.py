"""The rc.8 "version 0" layout (FORMAT.md §13): read-only support.

Differences that matter to a reader: streamed chunks are top-level ``assistant/chunk`` events,
runs of them may be packed into one top-level row whose members take seqs ``seq0``,
``seq0+1``…, and assistant messages may use the older pre-identity shape.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from looprescue.dsh.envelope import EnvelopeProblem
from looprescue.dsh.stream import PACKED_ROW_TYPES, expand_row
from looprescue.dsh.views import FieldProblem, StreamEntry, convert

PACKED_ROW_KEYS = frozenset({"type", "seq0", "time0", "data"})


def is_packed_row(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("type") in PACKED_ROW_TYPES and "seq0" in obj


def expand_packed_row(row: dict, expected_seq: int) -> Iterator[dict]:
    """Turn a top-level packed row into the ``assistant/chunk`` events it stands for."""
    extra = set(row) - PACKED_ROW_KEYS
    if extra:
        raise EnvelopeProblem(f"packed {row['type']} row has unexpected field {sorted(extra)[0]}")
    seq0 = row.get("seq0")
    if isinstance(seq0, bool) or not isinstance(seq0, int):
        raise EnvelopeProblem(f"packed {row['type']} row has no integer seq0")
    if seq0 != expected_seq:
        raise EnvelopeProblem(f"seq gap (expected {expected_seq}, got {seq0})")
    data = row.get("data")
    if not isinstance(data, dict):
        raise EnvelopeProblem(f"packed {row['type']} row (seq0 {seq0}) has no data object")
    inner = {**data, "type": row["type"], "time0": row.get("time0")}
    try:
        convert(inner, StreamEntry)
    except FieldProblem as problem:
        raise EnvelopeProblem(f"packed row seq0 {seq0}: {problem}") from None
    for k, (time, chunk) in enumerate(expand_row(inner)):
        yield {
            "type": "assistant/chunk",
            "seq": seq0 + k,
            "time": time,
            "data": {"turn": data.get("turn"), "step": data.get("step"), "chunk": chunk},
        }


def legacy_message_id(session_id: str, seq: int) -> str:
    """The id readers synthesise for pre-identity messages."""
    return f"legacy-message:{session_id}:{seq}"
