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

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

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


def _shape(message: str, **context: Any) -> PydanticCustomError:
    return PydanticCustomError("shape", message, context)


class _View(BaseModel):
    # strict: no coercion (a "1" is not an int, a bool is not a number); unknown keys are
    # DSH's business and are ignored; frozen: a view is a checked snapshot.
    model_config = ConfigDict(strict=True, frozen=True, extra="ignore")


class Block(_View):
    """A content block (FORMAT.md §5.2); legacy logs nest ``tool-result`` blocks."""

    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    arguments: str | None = None
    toolCallId: str | None = None
    isError: bool | None = None
    content: list[Block] | str | None = None

    @model_validator(mode="after")
    def _fields_of_its_type(self) -> Block:
        if self.type in TEXT_BLOCK_TYPES and self.text is None:
            raise _shape("a {kind} block needs a string 'text'", kind=self.type)
        if self.type == "tool-call" and (self.id is None or self.name is None):
            raise _shape("a tool-call block needs a string 'id' and 'name'")
        return self


class Chunk(_View):
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

    @model_validator(mode="after")
    def _fields_of_its_type(self) -> Chunk:
        if self.type in _INDEXED_CHUNKS and self.index is None:
            raise _shape("a {kind} chunk needs an integer 'index'", kind=self.type)
        if self.type in TEXT_DELTA_TYPES and self.text is None:
            raise _shape("a {kind} chunk needs a string 'text'", kind=self.type)
        if self.type == "tool-call-delta" and self.argumentsDelta is None:
            raise _shape("a tool-call-delta chunk needs a string 'argumentsDelta'")
        if self.type == "block-end" and self.block is None:
            raise _shape("a block-end chunk needs the assembled 'block'")
        return self


class StreamEntry(_View):
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

    @model_validator(mode="after")
    def _fields_of_its_type(self) -> StreamEntry:
        if self.type == "chunk":
            if self.time is None or self.chunk is None:
                raise _shape("a chunk entry needs a numeric 'time' and a 'chunk' object")
            return self
        if self.type not in PACKED_ROW_TYPES:
            raise _shape("unknown stream entry type {kind!r}", kind=self.type)
        key = "args" if self.type == "tool-call-chunks" else "texts"
        members = self.args if key == "args" else self.texts
        if members is None:
            raise _shape("a {kind} row needs a list of strings in {key!r}", kind=self.type, key=key)
        if self.time0 is None or self.index is None:
            raise _shape(
                "a {kind} row needs a numeric 'time0' and an integer 'index'", kind=self.type
            )
        expected = max(len(members) - 1, 0)
        if self.dt is None or len(self.dt) != expected:
            got = "no" if self.dt is None else len(self.dt)
            raise _shape(
                "a {kind} row has {n} members but {got} time gaps (expected {expected})",
                kind=self.type,
                n=len(members),
                got=got,
                expected=expected,
            )
        if self.type == "tool-call-chunks" and self.id is None:
            raise _shape("a tool-call-chunks row needs a string call 'id'")
        return self

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


class TurnStart(_View):
    turn: int


class TurnEndReason(_View):
    kind: str


class TurnEnd(_View):
    turn: int
    reason: TurnEndReason | None = None


class Step(_View):
    turn: int
    step: int


class Source(_View):
    kind: str | None = None
    callId: str | None = None
    replayState: Any = None


class Message(_View):
    """A message object (FORMAT.md §5.1); the content of a user message may be a string."""

    content: list[Block] | str
    role: str | None = None
    id: str | None = None
    source: Source | None = None


class SystemMessage(_View):
    turn: int | None = None
    step: int | None = None
    message: Message


class ModelMessage(_View):
    content: list[Block]
    role: str | None = None
    id: str | None = None
    source: Source | None = None


class AssistantMessage(_View):
    """``assistant/message`` data; the legacy pre-identity shape has ``content`` directly.
    ``stream`` is None when absent, or when it was unreadable (a warning says so)."""

    turn: int | None = None
    step: int | None = None
    message: ModelMessage | None = None
    content: list[Block] | None = None
    stream: list[StreamEntry] | None = None

    @model_validator(mode="after")
    def _has_content(self) -> AssistantMessage:
        if self.message is None and self.content is None:
            raise _shape("an assistant message needs 'message' (or a legacy 'content' list)")
        return self

    @property
    def blocks(self) -> list[Block]:
        if self.message is not None:
            return self.message.content
        return self.content or []


class Attempt(_View):
    turn: int | None = None
    step: int | None = None
    stream: list[StreamEntry] = []


class ToolCall(_View):
    turn: int | None = None
    step: int | None = None
    callId: str
    name: str
    arguments: str | None = None


class ToolError(_View):
    name: str | None = None
    code: str | None = None


class ToolMessage(_View):
    toolCallId: str | None = None
    source: Source | None = None
    content: list[Block] | str | None = None
    isError: bool | None = None


class ToolResult(_View):
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


class SessionTitle(_View):
    title: str


class JobCall(_View):
    callId: str | None = None


class JobSettled(_View):
    status: str | None = None
    detail: str | None = None
    toolCall: JobCall | None = None


class Retry(_View):
    turn: int | None = None
    step: int | None = None


class RequestHeader(_View):
    header: dict[str, Any] | None = None


class LegacyChunk(_View):
    turn: int | None = None
    step: int | None = None
    chunk: Chunk


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


@dataclass(frozen=True, slots=True)
class Viewed:
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
    if not isinstance(data, dict):
        problem = FieldProblem("data", f"must be an object, got {_kind_of(data)}")
        return Viewed(None, problem, family.strict)
    try:
        return Viewed(family.model.model_validate(data))
    except ValidationError as err:
        problem = field_problem(err)
    if family.model is AssistantMessage and problem.field.startswith("data.stream"):
        # The stream is log-only: keep the message (DSH replays its content), drop the stream.
        try:
            view = AssistantMessage.model_validate({**data, "stream": None})
        except ValidationError as err:
            return Viewed(None, field_problem(err), True)
        return Viewed(view, problem, False)
    return Viewed(None, problem, family.strict)


_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}
_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "none", "list", "dict", "tuple"})


def field_problem(err: ValidationError) -> FieldProblem:
    """The most specific error as ``FieldProblem``; alternatives of a union are merged."""
    by_path: dict[str, list[dict]] = {}
    for item in err.errors(include_url=False):
        by_path.setdefault(_path(item["loc"]), []).append(item)
    path = max(by_path, key=lambda p: (p.count(".") + p.count("["), -list(by_path).index(p)))
    items = by_path[path]
    expected = [_EXPECTED[i["type"]] for i in items if i["type"] in _EXPECTED]
    first = items[0]
    if first["type"] == "missing":
        return FieldProblem(path, "is missing")
    if expected and len(expected) == len(items):
        wanted = " or ".join(dict.fromkeys(expected))
        return FieldProblem(path, f"must be {wanted}, got {_kind_of(first['input'])}")
    return FieldProblem(path, first["msg"])


def _path(loc: tuple) -> str:
    text = "data"
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in _TYPE_TAGS or not part[:1].islower() or "[" in part:
            continue  # a union alternative's name, not a field
        else:
            text += f".{part}"
    return text


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
