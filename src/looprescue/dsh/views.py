"""Typed views of DSH events: the fields of each event family, type-checked once, on read.

The reader builds the view of every event of a family below as it reads the event; the rest
of looprescue reads fields from the view (or indexes the raw dict, whose shape the view has
checked) and never checks a type again. A field of the wrong type is a ``FieldProblem`` naming
the field, e.g. ``data.message.content[0].type must be a string, got a list``.

What a bad field means depends on what DSH does with the event (FORMAT.md):

* lifecycle and surface events (turns, steps, tool calls and results, the four message
  types): DSH rebuilds the history and the tool lifecycle from them and refuses logs that
  break those rules (§4, §8.3), so a bad field is a format error (``strict``);
* ``data.stream`` of an ``assistant/message``: DSH replays from ``content`` only and does not
  check the stream on load (§6.5, §8.2), so a bad stream is a warning and the stream is left
  out of the view (``stream`` is None);
* log-only events looprescue reads (failed attempts, retries, jobs, titles, request headers):
  never replayed, so a bad one is a warning and the event is skipped.

Event types without a family here are not read by looprescue, so their fields are not checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec

TEXT_BLOCK_TYPES = ("reasoning", "text")
TEXT_DELTA_TYPES = {"reasoning-delta": "reasoning", "text-delta": "text"}
PACKED_ROW_TYPES = {
    "reasoning-chunks": "reasoning-delta",
    "text-chunks": "text-delta",
    "tool-call-chunks": "tool-call-delta",
}
_INDEXED_CHUNKS = frozenset({"block-start", "block-end", "tool-call-delta", *TEXT_DELTA_TYPES})


class FieldProblem(ValueError):
    """A field of an event has the wrong type or is missing; ``field`` is its path."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        # "data.turn must be an integer, …" / "data.stream[1]: a text-chunks row has …"
        sep = " " if problem.startswith(("must ", "is ")) else ": "
        super().__init__(f"{field}{sep}{problem}")


class _View(msgspec.Struct, frozen=True):
    """A checked, read-only snapshot of one JSON object (unknown keys are DSH's business and
    are ignored). Converted with ``strict=True``: a "1" is not an int, a bool not a number."""


class Block(_View, frozen=True):
    """A content block (FORMAT.md §5.2); legacy logs nest ``tool-result`` blocks."""

    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    arguments: str | None = None
    toolCallId: str | None = None
    isError: bool | None = None
    content: list[Block] | str | None = None

    def __post_init__(self) -> None:
        if self.type in TEXT_BLOCK_TYPES and self.text is None:
            raise ValueError(f"a {self.type} block needs a string 'text'")
        if self.type == "tool-call" and (self.id is None or self.name is None):
            raise ValueError("a tool-call block needs a string 'id' and 'name'")


class Chunk(_View, frozen=True):
    """One stream chunk (FORMAT.md §6.5); usage, reason and replayState stay opaque."""

    type: str
    index: int | None = None
    blockType: str | None = None
    text: str | None = None
    id: str | None = None
    name: str | None = None
    argumentsDelta: str | None = None
    block: Block | None = None
    replayState: Any = None

    def __post_init__(self) -> None:
        if self.type in _INDEXED_CHUNKS and self.index is None:
            raise ValueError(f"a {self.type} chunk needs an integer 'index'")
        if self.type in TEXT_DELTA_TYPES and self.text is None:
            raise ValueError(f"a {self.type} chunk needs a string 'text'")
        if self.type == "tool-call-delta" and self.argumentsDelta is None:
            raise ValueError("a tool-call-delta chunk needs a string 'argumentsDelta'")
        if self.type == "block-end" and self.block is None:
            raise ValueError("a block-end chunk needs the assembled 'block'")


class StreamEntry(_View, frozen=True):
    """An entry of ``data.stream``: a timed chunk, or a packed run of deltas."""

    type: str
    time: float | None = None
    chunk: Chunk | None = None
    time0: float | None = None
    index: int | None = None
    dt: list[float] | None = None
    texts: list[str] | None = None
    args: list[str] | None = None
    id: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        kind = self.type
        if kind == "chunk":
            if self.time is None or self.chunk is None:
                raise ValueError("a chunk entry needs a numeric 'time' and a 'chunk' object")
            return
        if kind not in PACKED_ROW_TYPES:
            raise ValueError(f"unknown stream entry type {kind!r}")
        key = "args" if kind == "tool-call-chunks" else "texts"
        members = self.args if key == "args" else self.texts
        if members is None:
            raise ValueError(f"a {kind} row needs a list of strings in {key!r}")
        if self.time0 is None or self.index is None:
            raise ValueError(f"a {kind} row needs a numeric 'time0' and an integer 'index'")
        expected = max(len(members) - 1, 0)
        if self.dt is None or len(self.dt) != expected:
            got = "no" if self.dt is None else len(self.dt)
            raise ValueError(
                f"a {kind} row has {len(members)} members but {got} time gaps (expected {expected})"
            )
        if kind == "tool-call-chunks" and self.id is None:
            raise ValueError("a tool-call-chunks row needs a string call 'id'")

    @property
    def members(self) -> list[str]:
        return (self.args if self.type == "tool-call-chunks" else self.texts) or []

    def text_deltas(self) -> Iterator[tuple[str, int, str]]:
        """``(channel, block index, text)`` for each reasoning/text delta of this entry."""
        if self.chunk is not None:
            channel = TEXT_DELTA_TYPES.get(self.chunk.type)
            if channel is not None:
                yield channel, self.chunk.index, self.chunk.text  # type: ignore[misc]
            return
        channel = TEXT_DELTA_TYPES.get(PACKED_ROW_TYPES[self.type])
        if channel is not None:
            for piece in self.members:
                yield channel, self.index, piece  # type: ignore[misc]


def text_deltas(stream: list[StreamEntry]) -> Iterator[tuple[str, int, str]]:
    """Every reasoning/text delta of a stream in order: ``(channel, block index, text)``."""
    for entry in stream:
        yield from entry.text_deltas()


# -- event data --------------------------------------------------------------------------------


class TurnStart(_View, frozen=True):
    turn: int


class TurnEndReason(_View, frozen=True):
    kind: str


class TurnEnd(_View, frozen=True):
    turn: int
    reason: TurnEndReason | None = None


class Step(_View, frozen=True):
    turn: int
    step: int


class Source(_View, frozen=True):
    kind: str | None = None
    callId: str | None = None
    replayState: Any = None


class Message(_View, frozen=True):
    """A message object (FORMAT.md §5.1); the content of a user message may be a string."""

    content: list[Block] | str
    role: str | None = None
    id: str | None = None
    source: Source | None = None

    def human_text(self) -> str | None:
        """What the human wrote, when a user message is theirs (``source.kind`` "user"): its
        first text block. DSH puts its runtime context in later blocks and in messages of
        other kinds (snapshots, notices), which ask for nothing."""
        if self.source is None or self.source.kind != "user":
            return None
        if isinstance(self.content, str):
            return self.content
        return next((block.text for block in self.content if block.type == "text"), None)


class SystemMessage(_View, frozen=True):
    message: Message
    turn: int | None = None
    step: int | None = None


class ModelMessage(_View, frozen=True):
    content: list[Block]
    role: str | None = None
    id: str | None = None
    source: Source | None = None


class AssistantMessage(_View, frozen=True):
    """``assistant/message`` data; the legacy pre-identity shape has ``content`` directly.
    ``stream`` is None when absent, or when it was unreadable (a warning says so)."""

    turn: int | None = None
    step: int | None = None
    message: ModelMessage | None = None
    content: list[Block] | None = None
    stream: list[StreamEntry] | None = None

    def __post_init__(self) -> None:
        if self.message is None and self.content is None:
            raise ValueError("an assistant message needs 'message' (or a legacy 'content' list)")

    @property
    def blocks(self) -> list[Block]:
        if self.message is not None:
            return self.message.content
        return self.content or []


class Attempt(_View, frozen=True):
    turn: int | None = None
    step: int | None = None
    stream: list[StreamEntry] = msgspec.field(default_factory=list)


class ToolCall(_View, frozen=True):
    callId: str
    name: str
    arguments: str | None = None
    turn: int | None = None
    step: int | None = None


class ToolError(_View, frozen=True):
    name: str | None = None
    code: str | None = None


class ToolMessage(_View, frozen=True):
    toolCallId: str | None = None
    source: Source | None = None
    content: list[Block] | str | None = None
    isError: bool | None = None


class ToolResult(_View, frozen=True):
    """``tool/result`` data: v4 (``message`` with ``toolCallId``), rc.8 (a ``user`` message
    with a nested ``tool-result`` block) or pre-identity (``callId`` beside the content)."""

    turn: int | None = None
    step: int | None = None
    message: ToolMessage | None = None
    error: ToolError | None = None
    callId: str | None = None
    content: list[Block] | str | None = None
    isError: bool | None = None

    def _nested(self) -> Block | None:
        content = self.message.content if self.message is not None else None
        if isinstance(content, list) and content and content[0].type == "tool-result":
            return content[0]
        return None

    @property
    def call_id(self) -> str | None:
        """The call this result answers: ``toolCallId``, the nested block's, the source's."""
        message, nested = self.message, self._nested()
        if message is not None and message.toolCallId is not None:
            return message.toolCallId
        if nested is not None and nested.toolCallId is not None:
            return nested.toolCallId
        if message is not None and message.source is not None and message.source.callId:
            return message.source.callId
        return self.callId

    @property
    def is_error(self) -> bool:
        nested = self._nested()
        return bool(
            (self.message is not None and self.message.isError)
            or (nested is not None and nested.isError)
            or self.isError
        )

    @property
    def result_content(self) -> list[Block] | str | None:
        nested = self._nested()
        if nested is not None:
            return nested.content
        return self.message.content if self.message is not None else self.content


class SessionTitle(_View, frozen=True):
    title: str


class JobCall(_View, frozen=True):
    callId: str | None = None


class JobSettled(_View, frozen=True):
    status: str | None = None
    detail: str | None = None
    toolCall: JobCall | None = None


class Retry(_View, frozen=True):
    turn: int | None = None
    step: int | None = None


class RequestHeader(_View, frozen=True):
    header: dict[str, Any] | None = None


class LegacyChunk(_View, frozen=True):
    chunk: Chunk
    turn: int | None = None
    step: int | None = None


@dataclass(frozen=True, slots=True)
class Family:
    model: type[_View]
    strict: bool  # a bad field: a format error (True), or a warning and the event skipped


FAMILIES: dict[str, Family] = {
    "turn/start": Family(TurnStart, True),
    "turn/end": Family(TurnEnd, True),
    "step/start": Family(Step, True),
    "step/end": Family(Step, True),
    "system/message": Family(SystemMessage, True),
    "user/message": Family(Message, True),
    "assistant/message": Family(AssistantMessage, True),
    "tool/call": Family(ToolCall, True),
    "tool/result": Family(ToolResult, True),
    "assistant/attempt": Family(Attempt, False),
    "assistant/chunk": Family(LegacyChunk, False),
    "llm/retry": Family(Retry, False),
    "job/settled": Family(JobSettled, False),
    "session/title": Family(SessionTitle, False),
    "request/header": Family(RequestHeader, False),
}


class Viewed(NamedTuple):
    """The view of one event (None: no family, or skipped) and what was wrong, if anything:
    ``problem`` is set for a skipped event or a left-out stream, with ``fatal`` telling
    whether it is a format error."""

    view: _View | None
    problem: FieldProblem | None = None
    fatal: bool = False


def view_event(event_type: str, data: Any) -> Viewed:
    """Check ``data`` of an event of ``event_type`` against its family."""
    family = FAMILIES.get(event_type)
    if family is None:
        return Viewed(None)
    try:
        return Viewed(convert(data, family.model))
    except FieldProblem as problem:
        if family.model is not AssistantMessage or not problem.field.startswith("data.stream"):
            return Viewed(None, problem, family.strict)
        stream_problem = problem
    # The stream is log-only: keep the message (DSH replays its content), leave the stream out.
    try:
        view = convert({**data, "stream": None}, AssistantMessage)
    except FieldProblem as problem:
        return Viewed(None, problem, True)
    return Viewed(view, stream_problem, False)


def convert(value: Any, view: type[_View]) -> Any:
    """``value`` (the ``data`` of an event, parsed JSON) as a checked ``view``; raises
    FieldProblem naming the field."""
    try:
        return msgspec.convert(value, view, strict=True)
    except msgspec.ValidationError as err:
        raise field_problem(err) from None


_NAMES = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "array": "a list",
    "object": "an object",
    "null": "null",
}
_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_TYPE = re.compile(r"^Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`$")


def field_problem(err: msgspec.ValidationError) -> FieldProblem:
    """msgspec's ``Expected `str`, got `array` - at `$.message.content[0].type``` as
    ``data.message.content[0].type must be a string, got a list``."""
    match = _AT.match(str(err))
    what, path = (match["what"], match["path"] or "") if match else (str(err), "")
    field = "data" + path
    if typed := _TYPE.match(what):
        names = [_NAMES.get(n.strip(), n.strip()) for n in typed["want"].split("|")]
        # an optional field may be null, but "must be a string" says what it is for
        wanted = " or ".join(n for n in names if n != "null" or len(names) == 1)
        return FieldProblem(
            field, f"must be {wanted}, got {_NAMES.get(typed['got'], typed['got'])}"
        )
    if missing := _MISSING.match(what):
        return FieldProblem(f"{field}.{missing['name']}", "is missing")
    return FieldProblem(field, what)
