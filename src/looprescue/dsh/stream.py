"""Packed stream rows inside ``assistant/message``/``assistant/attempt`` ``data.stream``.

DSH stores runs of deltas packed (``texts``/``args`` plus time gaps ``dt``); these helpers turn
them back into plain stream chunks (FORMAT.md §6.5). They index the raw dicts directly: the
reader has checked every entry against ``views.StreamEntry`` before anyone gets to see it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from looprescue.dsh.views import PACKED_ROW_TYPES

__all__ = ["PACKED_ROW_TYPES", "expand_row", "expand_stream", "members_of"]


def members_of(row: dict) -> list:
    """The packed pieces of a row (``texts``, or ``args`` for tool calls)."""
    return row["args"] if row["type"] == "tool-call-chunks" else row["texts"]


def expand_row(row: dict) -> Iterator[tuple[float, dict]]:
    """One ``(time, delta chunk)`` per member of a packed row."""
    delta_type = PACKED_ROW_TYPES[row["type"]]
    time = row["time0"]
    gaps = row["dt"]
    for k, piece in enumerate(members_of(row)):
        if k:
            time += gaps[k - 1]
        if delta_type == "tool-call-delta":
            chunk = {"type": delta_type, "index": row["index"], "id": row["id"]}
            if "name" in row:
                chunk["name"] = row["name"]
            chunk["argumentsDelta"] = piece
        else:
            chunk = {"type": delta_type, "index": row["index"], "text": piece}
        yield time, chunk


def expand_stream(stream: Iterable[dict]) -> Iterator[tuple[float, dict]]:
    """Expand a checked ``data.stream`` list into ``(time, chunk)`` pairs, unpacking rows."""
    for entry in stream:
        if entry["type"] == "chunk":
            yield entry["time"], entry["chunk"]
        else:
            yield from expand_row(entry)
