"""The OpenAI Responses API on the wire (``POST /v1/responses``): :class:`ResponsesWire`.

A response is a list of output items: ``reasoning`` (its summary parts are the reasoning the
engine watches), ``message`` (its ``output_text`` parts are the answer), ``function_call`` (a
tool call, never cut) and others (web search, file search, MCP calls, ...), which the engine
does not model and passes on as they came. The decoder gives each summary part and each text
part a block of its own, so the engine sees the same shape as with the other protocols.

The stream repeats what its deltas said: a part's ``.done`` event, an item's
``output_item.done`` and ``response.completed`` carry the whole text again. After a cut those
would hold the loop, so the encoder writes them itself from what the client was sent, and takes
from the upstream's own ``.done`` item only the fields the engine does not read (its ids, its
status, an encrypted reasoning payload). An item whose text was cut loses its encrypted
payload: it covers the whole looping text, and a client that sends it back would put the loop
back into the conversation. Every event the client gets is numbered again (``sequence_number``)
and keeps the first attempt's response id, as the SDKs check.

A continuation resends the request's own ``input`` with the answer kept so far and the
correction after it, so it works whether the client chains with ``previous_response_id`` (kept
as it was) or sends its whole history with ``store: false``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import LoopRescueConfig
from ..rescue.continuation import KeptWork
from ..rescue.events import (
    BlockStarted,
    BlockStopped,
    ClientItem,
    EmitBlockStart,
    EmitBlockStop,
    EmitDelta,
    EmitError,
    EmitFinish,
    EmitMarker,
    EmitMessageStart,
    EmitOpaque,
    EmitPing,
    EmitSignature,
    EngineOutput,
    FinishReported,
    MessageEnded,
    MessageStarted,
    Opaque,
    ReasoningDelta,
    StopReason,
    TextDelta,
    ToolArgsDelta,
    UpstreamEvent,
    UpstreamFailed,
    Usage,
    UsageReported,
)
from ..rescue.sanitize import HistoryCut, HistoryPruner
from . import jsonfast
from .base import LIGHT_EFFORTS, Malformed, Wire, count, items, obj, string
from .sse import SSEEvent

ERROR_TYPE = "server_error"
# the one field the engine sets on an item's own ``.done`` copy when it came from upstream
_ITEM_DONE = "looprescue_item_done"
_USAGE_COUNTS = frozenset({"input_tokens", "output_tokens", "total_tokens"})


def usage_from(data: Any) -> Usage:
    if not isinstance(data, Mapping):
        return Usage()
    details = data.get("input_tokens_details")
    cached = count(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    total_input = count(data.get("input_tokens"))
    uncached = None if total_input is None else max(0, total_input - (cached or 0))
    extra = {k: v for k, v in data.items() if k not in _USAGE_COUNTS and v is not None}
    return Usage(
        input_tokens=uncached,
        output_tokens=count(data.get("output_tokens")),
        cache_read_tokens=cached,
        extra=extra,
    )


def usage_to(usage: Usage) -> dict[str, Any]:
    prompt = (usage.input_tokens or 0) + (usage.cache_read_tokens or 0)
    output = usage.output_tokens or 0
    out: dict[str, Any] = dict(usage.extra)
    out["input_tokens"] = prompt
    out["output_tokens"] = output
    out["total_tokens"] = prompt + output
    if usage.cache_read_tokens is not None:
        details = dict(out.get("input_tokens_details") or {})
        details["cached_tokens"] = usage.cache_read_tokens
        out["input_tokens_details"] = details
    return out


def error_body(item: EmitError) -> dict[str, Any]:
    error = {"message": item.message, "type": item.error_type or ERROR_TYPE}
    return {"error": {**error, "param": None, "code": item.error_type}}


class ResponsesWire(Wire):
    name = "responses"
    end_marker = b"response.completed"
    reasoning_after_text = True  # reasoning and messages are output items of their own

    def decoder(self) -> ResponsesDecoder:
        return ResponsesDecoder()

    def encoder(self) -> ResponsesEncoder:
        return ResponsesEncoder()

    def collector(self) -> ResponsesCollector:
        return ResponsesCollector()

    def whole_events(self, message: Any) -> list[UpstreamEvent]:
        return response_events(message)

    def error_body(self, error: EmitError) -> dict[str, Any]:
        return error_body(error)

    def request_problem(self, body: Mapping[str, Any]) -> str | None:
        model = body.get("model")
        if model is not None and not isinstance(model, str):
            return "model: must be a string"
        if not isinstance(body.get("stream"), bool | None):
            return "stream: must be a boolean"
        if not isinstance(body.get("input"), str | list | None):
            return "input: must be a string or a list of items"
        if not isinstance(body.get("previous_response_id"), str | None):
            return "previous_response_id: must be a string"
        if not isinstance(body.get("reasoning"), Mapping | None):
            return "reasoning: must be an object"
        return None

    def rescues(self, body: Mapping[str, Any]) -> bool:
        # a background response is polled, not streamed: nothing to watch as it is written
        return body.get("background") is not True

    def tool_history(self, body: Mapping[str, Any]) -> list[Any]:
        from ..guard.history import responses_tool_history

        return responses_tool_history(body)

    def conversation_view(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        messages = []
        for item in _input_items(body):
            if isinstance(item, Mapping) and isinstance(item.get("role"), str):
                content = item.get("content")
                if isinstance(content, list):  # input_text / output_text parts as text blocks
                    content = [
                        {"type": "text", "text": part["text"]}
                        for part in content
                        if isinstance(part, Mapping) and isinstance(part.get("text"), str)
                    ]
                messages.append({"role": item["role"], "content": content})
        view = {k: v for k, v in body.items() if k not in ("input", "instructions")}
        instructions = body.get("instructions")
        if isinstance(instructions, str):
            view["system"] = instructions
        view["messages"] = messages
        return view

    # ----- request side

    def with_user_text(self, body: Mapping[str, Any], text: str) -> dict[str, Any]:
        item = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }
        return {**body, "input": [*_input_items(body), item]}

    def with_assistant_text(self, body: Mapping[str, Any], kept: KeptWork) -> dict[str, Any]:
        if not kept.text:
            return dict(body)  # reasoning goes back only as the upstream's own encrypted items
        item = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": kept.text, "annotations": []}],
        }
        return {**body, "input": [*_input_items(body), item]}

    def with_retry_overrides(
        self, body: Mapping[str, Any], config: LoopRescueConfig
    ) -> dict[str, Any]:
        out = dict(body)
        if config.retryTemperature is not None:
            out["temperature"] = config.retryTemperature
        if config.retryReasoningEffort is not None and isinstance(body.get("reasoning"), Mapping):
            # the API's efforts stop at high
            effort = "high" if config.retryReasoningEffort == "max" else config.retryReasoningEffort
            out["reasoning"] = {**body["reasoning"], "effort": effort}
        # the Responses API has no frequency/presence penalties
        return out

    def with_lighter_reasoning(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``reasoning.effort`` low where the request has a ``reasoning`` object (its effort
        unset means medium); a request without one is left alone, as a model that does not
        reason rejects it."""
        reasoning = body.get("reasoning")
        if not isinstance(reasoning, Mapping) or reasoning.get("effort") in LIGHT_EFFORTS:
            return dict(body)
        return {**body, "reasoning": {**reasoning, "effort": "low"}}

    def output_budget(self, body: Mapping[str, Any]) -> int | None:
        return count(body.get("max_output_tokens"))

    def with_output_budget(self, body: Mapping[str, Any], tokens: int) -> dict[str, Any]:
        return {**body, "max_output_tokens": tokens}

    def prune_history(
        self, body: Mapping[str, Any], pruner: HistoryPruner
    ) -> tuple[dict[str, Any] | None, list[HistoryCut]]:
        return responses_history(body, pruner)


def _input_items(body: Mapping[str, Any]) -> list[Any]:
    """The request's input as a list of items (a string input is one user message)."""
    value = body.get("input")
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return list(value or ())


# --------------------------------------------------------------------------- history


def responses_history(
    body: Mapping[str, Any], pruner: HistoryPruner
) -> tuple[dict[str, Any] | None, list[HistoryCut]]:
    """Loops cut out of the ``output_text`` parts of earlier assistant messages in ``input``;
    every other item is carried over as the very same object."""
    inputs = body.get("input")
    if not isinstance(inputs, list):
        return None, []
    cuts: list[HistoryCut] = []
    out = list(inputs)
    for position, item in enumerate(inputs[:-1]):  # the last item is what the client asks now
        if not (isinstance(item, Mapping) and item.get("role") == "assistant"):
            continue
        content = item.get("content")
        if not isinstance(content, list):
            continue
        parts = list(content)
        for index, part in enumerate(content):
            if not (isinstance(part, Mapping) and part.get("type") == "output_text"):
                continue
            text = part.get("text")
            if not isinstance(text, str):
                continue
            found = pruner(text, "text")
            if found is None:
                continue
            cut, rule = found
            parts[index] = {**part, "text": cut.text}
            cuts.append(
                HistoryCut(
                    position, index, "text", "text", "pruned", rule, len(text), cut.kept_chars
                )
            )
        if parts != content:
            out[position] = {**item, "content": parts}
    return ({**body, "input": out}, cuts) if cuts else (None, [])


# --------------------------------------------------------------------------- decoding


def _finish(response: Mapping[str, Any]) -> FinishReported:
    """The stop reason of a finished response, with its fields besides output and usage."""
    status = response.get("status")
    details = response.get("incomplete_details")
    reason: StopReason = "stop"
    raw: str | None = status if isinstance(status, str) else None
    if status == "incomplete":
        why = details.get("reason") if isinstance(details, Mapping) else None
        reason = "max_tokens" if why == "max_output_tokens" else "other"
        raw = f"incomplete:{why}" if isinstance(why, str) else "incomplete"
    elif any(
        isinstance(item, Mapping) and item.get("type") == "function_call"
        for item in items(response, "output")
    ):
        reason = "tool_calls"
    extra = {k: v for k, v in response.items() if k not in ("output", "usage")}
    return FinishReported(reason, raw, extra)


class ResponsesDecoder:
    """Upstream SSE events -> engine events. Errors become :class:`UpstreamFailed`; items and
    events the engine does not model become :class:`Opaque`, passed on as they came."""

    def __init__(self) -> None:
        self._next = 0  # the next engine block index
        self._parts: dict[tuple[int, int, str], int] = {}  # (item, part, kind) -> block
        self._items: dict[int, Mapping[str, Any]] = {}  # output_index -> item as added
        self._tools: dict[int, int] = {}  # output_index of a function call -> block
        self._opaque: dict[int, int] = {}  # output_index of another item -> block
        self._output_tools = False

    def _block(self) -> int:
        index = self._next
        self._next += 1
        return index

    def decode(self, sse: SSEEvent) -> list[UpstreamEvent]:
        try:
            data = jsonfast.loads(sse.data)
        except ValueError as err:
            return [UpstreamFailed("malformed", f"{sse.describe()}: invalid JSON: {err}")]
        if not isinstance(data, dict):
            return [UpstreamFailed("malformed", f"{sse.describe()}: event is not an object")]
        kind = data.get("type") if isinstance(data.get("type"), str) else sse.event
        try:
            return self._decode(kind or "", data)
        except (Malformed, KeyError, TypeError, ValueError) as err:
            return [UpstreamFailed("malformed", f"{sse.describe()}: bad event: {err}")]

    def _decode(self, kind: str, data: dict[str, Any]) -> list[UpstreamEvent]:
        if kind == "response.created":
            response = obj(data, "response")
            meta = {"response": {k: v for k, v in response.items() if k != "output"}}
            return [
                MessageStarted(
                    string(response, "id", required=False),
                    string(response, "model", required=False),
                    Usage(),
                    meta,
                )
            ]
        if kind in ("response.in_progress", "response.queued"):
            return []  # the encoder says it once, for the response the client sees
        if kind == "response.output_item.added":
            return self._item_added(_output_index(data), obj(data, "item"), data)
        if kind == "response.output_item.done":
            return self._item_done(_output_index(data), obj(data, "item"), data)
        if kind in ("response.reasoning_summary_part.added", "response.content_part.added"):
            return self._part_added(kind, data)
        if kind in ("response.reasoning_summary_text.delta", "response.output_text.delta"):
            block = self._part_block(kind, data)
            if block is None:
                return [Opaque(None, data)]
            delta = string(data, "delta")
            if not delta:
                return []
            if kind == "response.output_text.delta":
                return [TextDelta(block, delta)]
            return [ReasoningDelta(block, delta)]
        if kind in ("response.reasoning_summary_part.done", "response.content_part.done"):
            block = self._part_block(kind, data)
            return [BlockStopped(block)] if block is not None else [Opaque(None, data)]
        if kind in ("response.reasoning_summary_text.done", "response.output_text.done"):
            # the encoder writes them from what was sent; an unknown part passes on
            return [] if self._part_block(kind, data) is not None else [Opaque(None, data)]
        if kind == "response.function_call_arguments.delta":
            block = self._tools.get(_output_index(data))
            if block is None:
                return [Opaque(None, data)]
            fragment = string(data, "delta")
            return [ToolArgsDelta(block, fragment)] if fragment else []
        if kind == "response.function_call_arguments.done":
            return [] if _output_index(data) in self._tools else [Opaque(None, data)]
        if kind in ("response.completed", "response.incomplete"):
            response = obj(data, "response")
            out: list[UpstreamEvent] = []
            if response.get("usage") is not None:
                out.append(UsageReported(usage_from(response["usage"])))
            out += [_finish(response), MessageEnded()]
            return out
        if kind == "response.failed":
            response = obj(data, "response", required=False)
            error = obj(response, "error", required=False)
            message = error.get("message")
            code = error.get("code")
            return [
                UpstreamFailed(
                    "in_band",
                    message if isinstance(message, str) else "the response failed",
                    error_type=code if isinstance(code, str) else None,
                )
            ]
        if kind == "error":
            message = data.get("message")
            code = data.get("code")
            return [
                UpstreamFailed(
                    "in_band",
                    message if isinstance(message, str) else str(data)[:200],
                    error_type=code if isinstance(code, str) else None,
                )
            ]
        output_index = data.get("output_index")
        if isinstance(output_index, int) and output_index in self._opaque:
            return [Opaque(self._opaque[output_index], data)]
        return [Opaque(None, data)]  # an event the engine does not know: passed on

    def _item_added(
        self, position: int, item: Mapping[str, Any], data: Mapping[str, Any]
    ) -> list[UpstreamEvent]:
        kind = item.get("type")
        if kind in ("reasoning", "message"):
            self._items[position] = item
            return []  # its parts open the blocks
        block = self._block()
        if kind == "function_call":
            self._tools[position] = block
            name, call_id = item.get("name"), item.get("call_id")
            out: list[UpstreamEvent] = [
                BlockStarted(
                    block,
                    "tool_call",
                    call_id if isinstance(call_id, str) else "",
                    name if isinstance(name, str) else None,
                    {"item": item},
                )
            ]
            arguments = item.get("arguments")
            if isinstance(arguments, str) and arguments:
                out.append(ToolArgsDelta(block, arguments))
            return out
        self._opaque[position] = block
        return [BlockStarted(block, "opaque", extra={"event": data})]

    def _item_done(
        self, position: int, item: Mapping[str, Any], data: Mapping[str, Any]
    ) -> list[UpstreamEvent]:
        if position in self._tools:
            return [BlockStopped(self._tools.pop(position))]
        if position in self._opaque:
            block = self._opaque.pop(position)
            return [Opaque(block, data), BlockStopped(block)]
        added = self._items.pop(position, None)
        if added is None:
            return [Opaque(None, data)]
        if not any(key[0] == position for key in self._parts):
            # an item without parts (a reasoning item with only its encrypted payload): nothing
            # to watch, so it goes on whole
            return [
                Opaque(None, {"type": "response.output_item.added", "item": added}),
                Opaque(None, data),
            ]
        for key in [key for key in self._parts if key[0] == position]:
            del self._parts[key]
        return [Opaque(None, {"type": _ITEM_DONE, "item": item})]

    def _part_added(self, kind: str, data: Mapping[str, Any]) -> list[UpstreamEvent]:
        position = _output_index(data)
        item = self._items.get(position)
        if item is None:
            return [Opaque(None, data)]
        reasoning = kind == "response.reasoning_summary_part.added"
        part_index = _part_index(data, reasoning)
        part = obj(data, "part")
        if not reasoning and part.get("type") != "output_text":
            return [Opaque(None, data)]  # a refusal part: passed on as it came
        block = self._block()
        self._parts[(position, part_index, "r" if reasoning else "t")] = block
        extra = {"item": item, "part": part}
        out: list[UpstreamEvent] = [
            BlockStarted(block, "reasoning" if reasoning else "text", extra=extra)
        ]
        text = part.get("text")
        if isinstance(text, str) and text:
            out.append(ReasoningDelta(block, text) if reasoning else TextDelta(block, text))
        return out

    def _part_block(self, kind: str, data: Mapping[str, Any]) -> int | None:
        reasoning = "reasoning" in kind
        key = (_output_index(data), _part_index(data, reasoning), "r" if reasoning else "t")
        return self._parts.get(key)


def _output_index(data: Mapping[str, Any]) -> int:
    value = data.get("output_index")
    if type(value) is not int or value < 0:
        raise Malformed(f"output_index must be a non-negative integer, got {value!r}")
    return value


def _part_index(data: Mapping[str, Any], reasoning: bool) -> int:
    value = data.get("summary_index" if reasoning else "content_index", 0)
    if type(value) is not int or value < 0:
        raise Malformed(f"part index must be a non-negative integer, got {value!r}")
    return value


# --------------------------------------------------------------------------- the client's items


class _Item:
    """One output item the client is being sent: its position, the item as it began, and the
    text of each part."""

    def __init__(self, position: int, item: Mapping[str, Any]) -> None:
        self.position = position
        self.item = dict(item)
        self.kind = item.get("type")
        self.parts: list[dict[str, Any]] = []
        self.arguments = ""
        self.cut = False  # some of its text was removed (a marker stands for it)
        self.done = False

    @property
    def item_id(self) -> str:
        value = self.item.get("id")
        return value if isinstance(value, str) else ""

    def final(self, upstream: Mapping[str, Any] | None) -> dict[str, Any]:
        """The item as done: the upstream's own fields where it sent its done copy, the text
        the client was sent, and no encrypted payload when the text was cut."""
        out = dict(upstream) if upstream is not None else dict(self.item)
        if self.kind == "reasoning":
            out["summary"] = [{"type": "summary_text", "text": p["text"]} for p in self.parts]
            if self.cut:
                out.pop("encrypted_content", None)
        elif self.kind == "message":
            out["content"] = [dict(p) for p in self.parts]
        elif self.kind == "function_call":
            out["arguments"] = self.arguments
        if upstream is None or self.cut:
            out["status"] = "completed"
        return out


class _Output:
    """The response the client is sent, item by item: shared by the encoder (events) and the
    collector (one body)."""

    def __init__(self) -> None:
        self.response: dict[str, Any] = {}
        self.items: list[_Item] = []
        self.by_block: dict[int, tuple[_Item, int]] = {}  # block -> (item, part; -1: whole)
        self.opaque: dict[int, int] = {}  # block -> client output_index
        self.finished: list[dict[str, Any]] = []  # output as done, in order
        self.slots: int = 0  # output indexes handed out

    def open_item(self, item: Mapping[str, Any]) -> tuple[_Item, bool]:
        """The client item a block of ``item`` belongs to; True when it is new."""
        current = self.items[-1] if self.items else None
        if current is not None and not current.done and current.item_id == item.get("id"):
            return current, False
        made = _Item(self.slots, item)
        self.slots += 1
        self.items.append(made)
        return made, True

    def current(self) -> _Item | None:
        current = self.items[-1] if self.items else None
        return current if current is not None and not current.done else None


class ResponsesEncoder:
    """Engine client items -> the Responses API's SSE events, numbered again."""

    def __init__(self) -> None:
        self._out = _Output()
        self._sequence = 0

    def _event(self, data: dict[str, Any]) -> bytes:
        data["sequence_number"] = self._sequence
        self._sequence += 1
        return b"event: " + data["type"].encode() + b"\ndata: " + jsonfast.dumps(data) + b"\n\n"

    def encode(self, item: ClientItem) -> bytes:
        out = self._out
        if isinstance(item, EmitDelta | EmitMarker):
            return self._delta(item)
        if isinstance(item, EmitBlockStart):
            return self._block_start(item)
        if isinstance(item, EmitBlockStop):
            return self._block_stop(item.index)
        if isinstance(item, EmitOpaque):
            return self._opaque(item)
        if isinstance(item, EmitMessageStart):
            response = dict(item.meta.get("response") or {})
            response.setdefault("id", item.message_id)
            response.setdefault("object", "response")
            response.setdefault("model", item.model)
            response["status"] = "in_progress"
            response["output"] = []
            out.response = response
            return self._event({"type": "response.created", "response": dict(response)}) + (
                self._event({"type": "response.in_progress", "response": dict(response)})
            )
        if isinstance(item, EmitSignature):
            return b""
        if isinstance(item, EmitPing):
            return b": ping\n\n"
        if isinstance(item, EmitFinish):
            data = self._close_item()
            response = _finished_response(out, item)
            kind = "response.incomplete" if response["status"] == "incomplete" else None
            return data + self._event({"type": kind or "response.completed", "response": response})
        if isinstance(item, EmitError):
            response = {
                **out.response,
                "status": "failed",
                "output": list(out.finished),
                "error": {"code": item.error_type or ERROR_TYPE, "message": item.message},
            }
            return self._close_item() + self._event(
                {"type": "response.failed", "response": response}
            )
        raise TypeError(f"not a client item: {item!r}")

    def _block_start(self, item: EmitBlockStart) -> bytes:
        out = self._out
        if item.kind == "opaque":
            data = self._close_item()
            position = out.slots
            out.slots += 1
            out.opaque[item.index] = position
            event = dict(item.extra.get("event") or {})
            event["output_index"] = position
            return data + self._event(event)
        upstream_item = item.extra.get("item")
        if not upstream_item:
            upstream_item = {} if item.kind == "tool_call" else self._own_item(item.kind)
        if item.kind == "tool_call":
            data = self._close_item()
            made, _ = out.open_item(upstream_item)
            made.item["arguments"] = ""
            out.by_block[item.index] = (made, -1)
            added = {"type": "response.output_item.added", "output_index": made.position}
            return data + self._event({**added, "item": dict(made.item)})
        current = out.current()
        data = b""
        if current is not None and current.item_id != upstream_item.get("id"):
            data += self._close_item()
        made, new = out.open_item(upstream_item)
        if new:
            shell = dict(made.item)
            if made.kind == "reasoning":
                shell["summary"] = []
                shell.pop("encrypted_content", None)
            else:
                shell["content"] = []
            added = {"type": "response.output_item.added", "output_index": made.position}
            data += self._event({**added, "item": shell})
        part = dict(item.extra.get("part") or {})
        if made.kind == "reasoning":
            part = {"type": "summary_text", "text": ""}
        else:
            part = {**part, "type": "output_text", "text": ""}
            part.setdefault("annotations", [])
        made.parts.append(part)
        number = len(made.parts) - 1
        out.by_block[item.index] = (made, number)
        where = {"item_id": made.item_id, "output_index": made.position}
        if made.kind == "reasoning":
            event = {"type": "response.reasoning_summary_part.added", **where}
            return data + self._event({**event, "summary_index": number, "part": dict(part)})
        event = {"type": "response.content_part.added", **where}
        return data + self._event({**event, "content_index": number, "part": dict(part)})

    def _own_item(self, kind: str) -> dict[str, Any]:
        """The item of a block the engine opens itself (a note where no upstream item was:
        the tool-loop guard's stop answer, the note that ends a ``cut``). Clients such as
        Codex refuse text whose item has no type or id."""
        out = self._out
        response_id = str(out.response.get("id") or "looprescue")
        tail = response_id.split("_", 1)[-1]
        if kind == "reasoning":
            return {"type": "reasoning", "id": f"rs_{tail}_{out.slots}", "summary": []}
        return {
            "type": "message",
            "id": f"msg_{tail}_{out.slots}",
            "role": "assistant",
            "status": "in_progress",
        }

    def _delta(self, item: EmitDelta | EmitMarker) -> bytes:
        found = self._out.by_block.get(item.index)
        if found is None:
            return b""
        made, number = found
        if isinstance(item, EmitMarker):
            made.cut = True
        where = {"item_id": made.item_id, "output_index": made.position}
        if number < 0:
            made.arguments += item.text
            event = {"type": "response.function_call_arguments.delta", **where}
            return self._event({**event, "delta": item.text})
        made.parts[number]["text"] += item.text
        if made.kind == "reasoning":
            event = {"type": "response.reasoning_summary_text.delta", **where}
            return self._event({**event, "summary_index": number, "delta": item.text})
        event = {"type": "response.output_text.delta", **where, "content_index": number}
        return self._event({**event, "delta": item.text, "logprobs": []})

    def _block_stop(self, index: int) -> bytes:
        out = self._out
        if out.opaque.pop(index, None) is not None:
            return b""
        found = out.by_block.pop(index, None)
        if found is None:
            return b""
        made, number = found
        where = {"item_id": made.item_id, "output_index": made.position}
        if number < 0:
            event = {"type": "response.function_call_arguments.done", **where}
            data = self._event({**event, "arguments": made.arguments})
            return data + self._close_item(None)
        part = made.parts[number]
        if made.kind == "reasoning":
            text = {"type": "response.reasoning_summary_text.done", **where}
            done = {"type": "response.reasoning_summary_part.done", **where}
            return self._event({**text, "summary_index": number, "text": part["text"]}) + (
                self._event({**done, "summary_index": number, "part": dict(part)})
            )
        text = {"type": "response.output_text.done", **where, "content_index": number}
        done = {"type": "response.content_part.done", **where, "content_index": number}
        return self._event({**text, "text": part["text"], "logprobs": []}) + self._event(
            {**done, "part": dict(part)}
        )

    def _opaque(self, item: EmitOpaque) -> bytes:
        out = self._out
        payload = item.payload
        if isinstance(payload, Mapping) and payload.get("type") == _ITEM_DONE:
            return self._close_item(payload.get("item"))
        if not isinstance(payload, Mapping):
            return b""
        event = dict(payload)
        if item.index is not None and item.index in out.opaque:
            event["output_index"] = out.opaque[item.index]
            if event.get("type") == "response.output_item.done":
                done = event.get("item")
                out.finished.append(dict(done) if isinstance(done, Mapping) else {})
        elif event.get("type") == "response.output_item.added":
            # an item passed on whole: it takes the next output index
            data = self._close_item()
            event["output_index"] = out.slots
            out.slots += 1
            return data + self._event(event)
        elif event.get("type") == "response.output_item.done" and "output_index" in event:
            event["output_index"] = out.slots - 1
            done = event.get("item")
            out.finished.append(dict(done) if isinstance(done, Mapping) else {})
        return self._event(event)

    def _close_item(self, upstream: Mapping[str, Any] | None = None) -> bytes:
        """``output_item.done`` of the item being written, if one is."""
        out = self._out
        current = out.current()
        if current is None:
            return b""
        data = b""
        for block, (made, number) in list(out.by_block.items()):
            if made is current and number >= 0:
                data += self._block_stop(block)  # a part the upstream never closed (a cut)
        current.done = True
        final = current.final(upstream)
        out.finished.append(final)
        done = {"type": "response.output_item.done", "output_index": current.position}
        return data + self._event({**done, "item": final})


def _finished_response(out: _Output, item: EmitFinish) -> dict[str, Any]:
    response = {**out.response, **{k: v for k, v in item.extra.items() if k != "id"}}
    response["id"] = out.response.get("id", response.get("id"))
    response["output"] = list(out.finished)
    response["usage"] = usage_to(item.usage)
    if item.reason == "max_tokens":
        response["status"] = "incomplete"
        response["incomplete_details"] = {"reason": "max_output_tokens"}
    elif response.get("status") in (None, "in_progress", "incomplete"):
        response["status"] = "completed"
        response["incomplete_details"] = None
    return response


# --------------------------------------------------------------------------- non-streaming


def response_events(body: Any) -> list[UpstreamEvent]:
    """A complete response object as the events its stream would have produced."""
    if not isinstance(body, Mapping):
        raise Malformed("response body is not an object")
    if body.get("object") not in (None, "response"):
        raise Malformed("body is not a response object")
    decoder = ResponsesDecoder()
    meta = {"response": {k: v for k, v in body.items() if k not in ("output", "usage")}}
    events: list[UpstreamEvent] = [
        MessageStarted(
            string(body, "id", required=False), string(body, "model", required=False), Usage(), meta
        )
    ]
    for position, item in enumerate(items(body, "output")):
        if not isinstance(item, Mapping):
            raise Malformed(f"output[{position}] is not an object")
        events += _whole_item(decoder, position, item)
    if body.get("usage") is not None:
        events.append(UsageReported(usage_from(body["usage"])))
    events += [_finish(body), MessageEnded()]
    return events


def _whole_item(
    decoder: ResponsesDecoder, position: int, item: Mapping[str, Any]
) -> list[UpstreamEvent]:
    """One output item as its stream's events, through the decoder (one path for both)."""
    kind = item.get("type")
    shell: dict[str, Any] = dict(item)
    parts: list[tuple[str, dict[str, Any]]] = []
    if kind == "reasoning":
        shell["summary"] = []
        for index, part in enumerate(items(item, "summary")):
            if isinstance(part, Mapping):
                parts.append(
                    (
                        "response.reasoning_summary_part.added",
                        {"summary_index": index, "part": dict(part)},
                    )
                )
    elif kind == "message":
        shell["content"] = []
        for index, part in enumerate(items(item, "content")):
            if isinstance(part, Mapping):
                parts.append(
                    ("response.content_part.added", {"content_index": index, "part": dict(part)})
                )
    elif kind == "function_call":
        shell["arguments"] = item.get("arguments") or ""
    added = {"type": "response.output_item.added", "output_index": position, "item": shell}
    events = decoder._decode("response.output_item.added", added)
    for event_type, fields in parts:
        data = {"type": event_type, "output_index": position, "item_id": item.get("id"), **fields}
        events += decoder._decode(event_type, data)
        done_type = event_type.replace(".added", ".done")
        events += decoder._decode(done_type, {**data, "type": done_type})
    done = {"type": "response.output_item.done", "output_index": position, "item": dict(item)}
    events += decoder._decode("response.output_item.done", done)
    return events


class ResponsesCollector:
    """Engine client items -> one complete response body (the encoder's items, no events)."""

    def __init__(self) -> None:
        self._encoder = ResponsesEncoder()
        self._result: dict[str, Any] = {}
        self.error: EmitError | None = None

    def add(self, item: EngineOutput) -> None:
        if isinstance(item, EmitError):
            self.error = item
            return
        if isinstance(item, EmitFinish):
            self._encoder._close_item()
            self._result = _finished_response(self._encoder._out, item)
            return
        if isinstance(
            item,
            EmitMessageStart | EmitBlockStart | EmitBlockStop | EmitDelta | EmitMarker | EmitOpaque,
        ):
            self._encoder.encode(item)

    def result(self) -> dict[str, Any]:
        if self._result:
            return self._result
        response = dict(self._encoder._out.response)
        response["output"] = list(self._encoder._out.finished)
        return response
