"""Client content blocks: one consistent numbering across every upstream attempt.

Upstream block indices restart with each upstream request; the client sees one response, so
its block indices continue where the last attempt stopped. A reasoning or text block opens on
the client lazily, with its first released character, so a block that turns out to be all loop
never appears as an empty block.
"""

from __future__ import annotations

from .events import (
    BlockKind,
    BlockStarted,
    EmitBlockStart,
    EmitBlockStop,
    EmitMarker,
    EngineOutput,
)


class ClientBlocks:
    """Maps upstream block indices of the current attempt to client indices."""

    __slots__ = ("_index", "_next", "_open", "_tail", "tool_calls_sent")

    def __init__(self) -> None:
        self._next = 0
        self._index: dict[int, int] = {}  # upstream index (this attempt) -> client index
        self._open: dict[int, BlockKind] = {}  # client index -> kind, while open on the client
        self._tail: dict[int, str] = {}  # last character sent in each client block
        self.tool_calls_sent = 0

    def new_attempt(self) -> None:
        self._index = {}

    def opened(self, start: BlockStarted) -> tuple[int, list[EngineOutput]]:
        """The client index of upstream block ``start.index``, opening it on first use."""
        index = self._index.get(start.index)
        if index is not None:
            return index, []
        index = self._next
        self._next += 1
        self._index[start.index] = index
        self._open[index] = start.kind
        return index, [
            EmitBlockStart(index, start.kind, start.tool_id, start.tool_name, start.extra)
        ]

    def sent(self, index: int, text: str) -> None:
        """Remember the end of what went into client block ``index``."""
        if text:
            self._tail[index] = text[-1]

    def ends_line(self, index: int) -> bool:
        """True when client block ``index`` is empty or its last character is a newline."""
        return self._tail.get(index, "\n") == "\n"

    def stopped(self, up_index: int) -> list[EngineOutput]:
        """Close upstream block ``up_index`` on the client, if it was ever opened there."""
        index = self._index.get(up_index)
        if index is None or index not in self._open:
            return []
        if self._open.pop(index) == "tool_call":
            self.tool_calls_sent += 1
        return [EmitBlockStop(index)]

    def close_all(self) -> list[EngineOutput]:
        out: list[EngineOutput] = []
        for index in sorted(self._open):
            if self._open[index] == "tool_call":
                self.tool_calls_sent += 1
            out.append(EmitBlockStop(index))
        self._open.clear()
        return out

    def note(self, text: str) -> list[EngineOutput]:
        """A note of the proxy's own, as a text block of its own."""
        index = self._next
        self._next += 1
        return [
            EmitBlockStart(index, "text"),
            EmitMarker(index, "text", text),
            EmitBlockStop(index),
        ]
