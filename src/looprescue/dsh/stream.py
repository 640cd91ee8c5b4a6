"""Packed stream rows inside ``assistant/message``/``assistant/attempt`` ``data.stream``.

DSH stores runs of deltas packed (``texts``/``args`` plus time gaps ``dt``); these helpers turn
them back into plain stream chunks and check that each row is well formed (FORMAT.md §6.5).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from looprescue.dsh.envelope import EnvelopeProblem

PACKED_ROW_TYPES = {
    "reasoning-chunks": "reasoning-delta",
    "text-chunks": "text-delta",
    "tool-call-chunks": "tool-call-delta",
}


def members_of(row: dict) -> list:
    """The packed pieces of a row (``texts``, or ``args`` for tool calls)."""
    return row["args"] if row["type"] == "tool-call-chunks" else row["texts"]


def check_packed_row(row: Any, where: str) -> None:
    """Raise EnvelopeProblem unless ``row`` is a well-formed packed row."""
    kind = row.get("type") if isinstance(row, dict) else None
    if kind not in PACKED_ROW_TYPES:
        raise EnvelopeProblem(f"{where}: not a packed stream row")
    member_key = "args" if kind == "tool-call-chunks" else "texts"
    members = row.get(member_key)
    gaps = row.get("dt")
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        raise EnvelopeProblem(f"{where}: {kind} row needs a list of strings in {member_key!r}")
    if not isinstance(gaps, list) or len(gaps) != max(len(members) - 1, 0):
        raise EnvelopeProblem(
            f"{where}: {kind} row has {len(members)} members but "
            f"{len(gaps) if isinstance(gaps, list) else 'no'} time gaps (expected "
            f"{max(len(members) - 1, 0)})"
        )
    if not isinstance(row.get("index"), int):
        raise EnvelopeProblem(f"{where}: {kind} row has no integer index")
    if kind == "tool-call-chunks" and not isinstance(row.get("id"), str):
        raise EnvelopeProblem(f"{where}: tool-call-chunks row has no call id")


def check_stream(stream: Any, where: str) -> None:
    if not isinstance(stream, list):
        raise EnvelopeProblem(f"{where}: data.stream must be a list")
    for position, entry in enumerate(stream):
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "chunk":
            if not isinstance(entry.get("chunk"), dict):
                raise EnvelopeProblem(f"{where}: stream entry {position} has no chunk object")
        elif kind in PACKED_ROW_TYPES:
            check_packed_row(entry, f"{where}: stream entry {position}")
        else:
            raise EnvelopeProblem(f"{where}: stream entry {position} has unknown type {kind!r}")


def expand_row(row: dict) -> Iterator[tuple[float, dict]]:
    """One ``(time, delta chunk)`` per member of a packed row."""
    delta_type = PACKED_ROW_TYPES[row["type"]]
    time = row.get("time0", 0)
    gaps = row.get("dt") or []
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
    """Expand a ``data.stream`` list into ``(time, chunk)`` pairs, unpacking packed rows."""
    for entry in stream:
        if entry["type"] == "chunk":
            yield entry["time"], entry["chunk"]
        else:
            yield from expand_row(entry)


def stream_channel_text(stream: Iterable[dict]) -> dict[int, tuple[str, str]]:
    """Concatenated reasoning/text deltas per block index: ``{index: (channel, text)}``.

    Used for failed attempts, whose streams have no ``block-end`` to read the text from.
    """
    blocks: dict[int, tuple[str, list[str]]] = {}
    for _time, chunk in expand_stream(stream):
        kind = chunk.get("type")
        if kind == "reasoning-delta" or kind == "text-delta":
            channel = "reasoning" if kind == "reasoning-delta" else "text"
            blocks.setdefault(chunk["index"], (channel, []))[1].append(chunk["text"])
    return {index: (channel, "".join(parts)) for index, (channel, parts) in blocks.items()}
