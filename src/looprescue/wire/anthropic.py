"""Anthropic Messages on the wire (FORMAT.md §10.5): :class:`AnthropicWire`.

All pure: :class:`AnthropicDecoder` turns upstream SSE events into engine events (anything
that does not have the protocol's shape becomes ``UpstreamFailed("malformed")``),
:class:`AnthropicEncoder` turns engine client items into SSE frames, and for non-streaming
requests :meth:`AnthropicWire.whole_events` / :class:`AnthropicCollector` do the same for a
whole message.
"""

from __future__ import annotations

import json
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
    Ping,
    ReasoningDelta,
    SignatureDelta,
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
from .base import (
    Malformed,
    Wire,
    check_messages,
    count,
    finish_from,
    finish_word,
    index_of,
    items,
    obj,
    string,
)
from .frames import (
    AnthropicBlockDelta,
    AnthropicInputJsonDelta,
    AnthropicTextDelta,
    AnthropicThinkingDelta,
    FrameMismatch,
    decode_anthropic_block_delta,
)
from .history import anthropic_history
from .sse import SSEEvent

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "max_tokens",
}
_STOP_WORDS: dict[str, str] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "max_tokens": "max_tokens",
}
ERROR_TYPE = "api_error"


_USAGE_COUNTS = frozenset(
    {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"}
)


def usage_from(data: Any) -> Usage:
    if not isinstance(data, Mapping):
        return Usage()
    return Usage(
        input_tokens=count(data.get("input_tokens")),
        output_tokens=count(data.get("output_tokens")),
        cache_read_tokens=count(data.get("cache_read_input_tokens")),
        cache_write_tokens=count(data.get("cache_creation_input_tokens")),
        extra={k: v for k, v in data.items() if k not in _USAGE_COUNTS and v is not None},
    )


def usage_to(usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = dict(usage.extra)
    if usage.input_tokens is not None:
        out["input_tokens"] = usage.input_tokens
    if usage.cache_write_tokens is not None:
        out["cache_creation_input_tokens"] = usage.cache_write_tokens
    if usage.cache_read_tokens is not None:
        out["cache_read_input_tokens"] = usage.cache_read_tokens
    out["output_tokens"] = usage.output_tokens or 0
    return out


def error_body(item: EmitError) -> dict[str, Any]:
    error = {"type": item.error_type or ERROR_TYPE, "message": item.message}
    return {"type": "error", "error": error}


def envelope(item: EmitMessageStart) -> dict[str, Any]:
    """The message object around the content, as message_start and a whole response carry it."""
    return {
        "id": item.message_id,
        "type": "message",
        "role": "assistant",
        "model": item.model,
        **{k: v for k, v in item.meta.items() if k not in ("id", "model")},
    }


class AnthropicWire(Wire):
    name = "anthropic"
    end_marker = b"message_stop"

    def decoder(self) -> AnthropicDecoder:
        return AnthropicDecoder()

    def encoder(self) -> AnthropicEncoder:
        return AnthropicEncoder()

    def collector(self) -> AnthropicCollector:
        return AnthropicCollector()

    def whole_events(self, message: Any) -> list[UpstreamEvent]:
        return message_events(message)

    def error_body(self, error: EmitError) -> dict[str, Any]:
        return error_body(error)

    def request_problem(self, body: Mapping[str, Any]) -> str | None:
        problem = check_messages(body, (str, list))
        if problem is None and not isinstance(body.get("system"), str | list | None):
            problem = "system: must be a string or a list of blocks"
        return problem

    def tool_history(self, body: Mapping[str, Any]) -> list[Any]:
        from ..guard.history import anthropic_tool_history

        return anthropic_tool_history(body)

    def with_user_text(self, body: Mapping[str, Any], text: str) -> dict[str, Any]:
        """Add ``text`` as a user text block: to the last message when it is a user turn (the
        API expects alternating roles; DSH itself appends reminders after tool results this
        way), else as a new user message."""
        messages = list(body.get("messages") or [])
        last = messages[-1] if messages else None
        if isinstance(last, Mapping) and last.get("role") == "user":
            content = last.get("content")
            if isinstance(content, str):
                blocks: list[Any] = [{"type": "text", "text": content}]
            else:
                blocks = list(content or [])
            blocks.append({"type": "text", "text": text})
            messages[-1] = {**last, "content": blocks}
        else:
            messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        return {**body, "messages": messages}

    def with_assistant_text(self, body: Mapping[str, Any], kept: KeptWork) -> dict[str, Any]:
        message = {"role": "assistant", "content": [{"type": "text", "text": kept.text}]}
        return {**body, "messages": [*(body.get("messages") or ()), message]}

    def with_retry_overrides(
        self, body: Mapping[str, Any], config: LoopRescueConfig
    ) -> dict[str, Any]:
        out = dict(body)
        if config.retryTemperature is not None:
            out["temperature"] = config.retryTemperature
        thinking = out.get("thinking")
        thinking_off = isinstance(thinking, Mapping) and thinking.get("type") == "disabled"
        if config.retryReasoningEffort is not None and not thinking_off:
            output_config = dict(out.get("output_config") or {})
            output_config["effort"] = config.retryReasoningEffort
            out["output_config"] = output_config
        # Anthropic Messages has no frequency/presence penalties
        return out

    def with_lighter_reasoning(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Budgeted thinking (``enabled``) has no lower setting than off, so it is turned off;
        adaptive thinking, and any request that sets an effort, gets effort low."""
        out = dict(body)
        thinking = body.get("thinking")
        kind = thinking.get("type") if isinstance(thinking, Mapping) else None
        if kind == "enabled":
            out["thinking"] = {"type": "disabled"}
        output_config = body.get("output_config")
        if output_config is None:
            output_config = {}
        if isinstance(output_config, Mapping) and (kind == "adaptive" or "effort" in output_config):
            out["output_config"] = {**output_config, "effort": "low"}
        return out

    def output_budget(self, body: Mapping[str, Any]) -> int | None:
        return count(body.get("max_tokens"))

    def with_output_budget(self, body: Mapping[str, Any], tokens: int) -> dict[str, Any]:
        return {**body, "max_tokens": tokens}

    def prune_history(
        self, body: Mapping[str, Any], pruner: HistoryPruner
    ) -> tuple[dict[str, Any] | None, list[HistoryCut]]:
        return anthropic_history(body, pruner)


# --------------------------------------------------------------------------- decoding


class AnthropicDecoder:
    """Upstream SSE events -> engine events. Errors become :class:`UpstreamFailed`; what the
    engine does not model (an event, a block or a delta of another type) becomes
    :class:`Opaque`, passed on as it came."""

    def __init__(self) -> None:
        self._opaque: set[int] = set()  # blocks of a type the engine does not model

    def decode(self, sse: SSEEvent) -> list[UpstreamEvent]:
        if sse.event == "content_block_delta":
            # most frames of a stream: decoded typed in one pass (``frames.py``); a frame of
            # another shape goes the general way below, which names what is wrong with it
            try:
                frame = decode_anthropic_block_delta(sse.data)
            except FrameMismatch:
                pass
            else:
                if not self._opaque or frame.index not in self._opaque:
                    return _typed_block_delta(frame)
        try:
            data = jsonfast.loads(sse.data)
        except ValueError as err:
            return [UpstreamFailed("malformed", f"{sse.describe()}: invalid JSON: {err}")]
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            return [UpstreamFailed("malformed", f"{sse.describe()}: data has no string 'type'")]
        kind = data["type"]
        if sse.event is not None and sse.event != kind:
            return [
                UpstreamFailed(
                    "malformed", f"{sse.describe()}: event name differs from data.type {kind!r}"
                )
            ]
        try:
            return self._decode(kind, data)
        except (Malformed, KeyError, TypeError, ValueError) as err:
            return [UpstreamFailed("malformed", f"{sse.describe()}: bad {kind} payload: {err}")]

    def _decode(self, kind: str, data: dict[str, Any]) -> list[UpstreamEvent]:
        if kind == "content_block_delta":
            index = index_of(data)
            delta = obj(data, "delta")
            if index in self._opaque:
                return [Opaque(index, delta)]
            return _block_delta(index, delta)
        if kind == "message_start":
            message = obj(data, "message")
            meta = {k: v for k, v in message.items() if k not in ("content", "usage")}
            return [
                MessageStarted(
                    string(message, "id", required=False),
                    string(message, "model", required=False),
                    usage_from(message.get("usage")),
                    meta,
                )
            ]
        if kind == "content_block_start":
            return _block_start(index_of(data), obj(data, "content_block"), self._opaque)
        if kind == "content_block_stop":
            return [BlockStopped(index_of(data))]
        if kind == "message_delta":
            out: list[UpstreamEvent] = []
            delta = obj(data, "delta", required=False)
            if delta.get("stop_reason") is not None:
                finish = finish_from(_STOP_REASONS, delta["stop_reason"])
                extra: dict[str, Any] = {
                    k: v for k, v in data.items() if k not in ("type", "delta", "usage")
                }
                rest = {k: v for k, v in delta.items() if k != "stop_reason"}
                if rest:
                    extra["delta"] = rest
                out.append(FinishReported(finish.reason, finish.raw, extra))
            if data.get("usage") is not None:
                out.append(UsageReported(usage_from(obj(data, "usage"))))
            return out
        if kind == "message_stop":
            return [MessageEnded()]
        if kind == "ping":
            return [Ping()]
        if kind == "error":
            error = obj(data, "error", required=False)
            said = error.get("message")
            kind_of = error.get("type")
            return [
                UpstreamFailed(
                    "in_band",
                    said if isinstance(said, str) else "upstream error",
                    error_type=kind_of if isinstance(kind_of, str) else None,
                )
            ]
        return [Opaque(None, data)]  # an event type the engine does not know: passed on


# the fields of each block type the engine models; the others are passed on as they came
_MODELED = {
    "thinking": frozenset({"type", "thinking", "signature"}),
    "text": frozenset({"type", "text"}),
    "tool_use": frozenset({"type", "id", "name", "input"}),
}


def _block_start(
    index: int, block: Mapping[str, Any], opaque: set[int] | None = None
) -> list[UpstreamEvent]:
    """The events of a block's start; a block of a type the engine does not model is opaque
    (its index goes into ``opaque``, so its deltas are passed on too)."""
    block_type = block.get("type")
    modeled = _MODELED.get(block_type) if isinstance(block_type, str) else None
    if modeled is None:
        if opaque is not None:
            opaque.add(index)
        return [BlockStarted(index, "opaque", extra=block)]
    extra = {k: v for k, v in block.items() if k not in modeled}
    if block_type == "thinking":
        out: list[UpstreamEvent] = [BlockStarted(index, "reasoning", extra=extra)]
        if thinking := string(block, "thinking", required=False):
            out.append(ReasoningDelta(index, thinking))
        if signature := string(block, "signature", required=False):
            out.append(SignatureDelta(index, signature))
        return out
    if block_type == "text":
        out = [BlockStarted(index, "text", extra=extra)]
        if text := string(block, "text", required=False):
            out.append(TextDelta(index, text))
        return out
    out = [BlockStarted(index, "tool_call", string(block, "id"), string(block, "name"), extra)]
    initial = block.get("input")
    if initial:
        out.append(ToolArgsDelta(index, json.dumps(initial, ensure_ascii=False)))
    return out


def _typed_block_delta(frame: AnthropicBlockDelta) -> list[UpstreamEvent]:
    """The events of a typed block delta (its type and index range were checked decoding it)."""
    index: int = frame.index
    delta = frame.delta
    if isinstance(delta, AnthropicTextDelta):
        return [TextDelta(index, delta.text)]
    if isinstance(delta, AnthropicThinkingDelta):
        return [ReasoningDelta(index, delta.thinking)]
    if isinstance(delta, AnthropicInputJsonDelta):
        return [ToolArgsDelta(index, delta.partial_json)]
    return [SignatureDelta(index, delta.signature)]


def _block_delta(index: int, delta: Mapping[str, Any]) -> list[UpstreamEvent]:
    delta_type = delta.get("type")
    if delta_type == "thinking_delta":
        return [ReasoningDelta(index, string(delta, "thinking"))]
    if delta_type == "text_delta":
        return [TextDelta(index, string(delta, "text"))]
    if delta_type == "input_json_delta":
        return [ToolArgsDelta(index, string(delta, "partial_json"))]
    if delta_type == "signature_delta":
        return [SignatureDelta(index, string(delta, "signature"))]
    return [Opaque(index, delta)]  # a citation, or a delta type added later: passed on


# --------------------------------------------------------------------------- encoding


class AnthropicEncoder:
    """Engine client items -> SSE frames (``event:`` line + ``data:`` line, as DSH expects)."""

    def encode(self, item: ClientItem) -> bytes:
        if type(item) is EmitDelta:
            # the per-chunk case, spelled out: the same bytes as _frame() of the dict below
            return b"%s%d%s%s}}\n\n" % (
                _DELTA_HEAD,
                item.index,
                _DELTA_KIND[item.kind],
                jsonfast.dumps(item.text),
            )
        if isinstance(item, EmitDelta | EmitMarker):
            return _frame(
                {"type": "content_block_delta", "index": item.index, "delta": _delta(item)}
            )
        if isinstance(item, EmitMessageStart):
            message = {**envelope(item), "content": [], "usage": usage_to(item.usage)}
            message.setdefault("stop_reason", None)
            message.setdefault("stop_sequence", None)
            return _frame({"type": "message_start", "message": message})
        if isinstance(item, EmitBlockStart):
            return _frame(
                {"type": "content_block_start", "index": item.index, "content_block": _start(item)}
            )
        if isinstance(item, EmitSignature):
            delta = {"type": "signature_delta", "signature": item.signature}
            return _frame({"type": "content_block_delta", "index": item.index, "delta": delta})
        if isinstance(item, EmitBlockStop):
            return _frame({"type": "content_block_stop", "index": item.index})
        if isinstance(item, EmitOpaque):
            if item.index is None:
                return _frame(item.payload)  # a whole event, as it came
            event: dict[str, Any] = {
                "type": "content_block_delta",
                "index": item.index,
                "delta": item.payload,
            }
            return _frame(event)
        if isinstance(item, EmitPing):
            return _frame({"type": "ping"})
        if isinstance(item, EmitFinish):
            extra = item.extra
            message_delta = {
                "type": "message_delta",
                **extra,
                "delta": {
                    "stop_reason": finish_word(
                        _STOP_WORDS, item.reason, item.raw_reason, "end_turn"
                    ),
                    "stop_sequence": None,
                    **extra.get("delta", {}),
                },
                "usage": usage_to(item.usage),
            }
            return _frame(message_delta) + _frame({"type": "message_stop"})
        if isinstance(item, EmitError):
            return _frame(error_body(item))
        raise TypeError(f"not a client item: {item!r}")


_DELTA_HEAD = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
_DELTA_KIND = {
    "reasoning": b',"delta":{"type":"thinking_delta","thinking":',
    "text": b',"delta":{"type":"text_delta","text":',
    "tool_call": b',"delta":{"type":"input_json_delta","partial_json":',
}


def _frame(data: Mapping[str, Any]) -> bytes:
    # orjson escapes newlines inside strings, so the payload is always one data line
    return b"event: " + data["type"].encode() + b"\ndata: " + jsonfast.dumps(data) + b"\n\n"


def _delta(item: EmitDelta | EmitMarker) -> dict[str, str]:
    if item.kind == "reasoning":
        return {"type": "thinking_delta", "thinking": item.text}
    if item.kind == "text":
        return {"type": "text_delta", "text": item.text}
    return {"type": "input_json_delta", "partial_json": item.text}


def _start(item: EmitBlockStart) -> dict[str, Any]:
    if item.kind == "opaque":
        return dict(item.extra)
    if item.kind == "reasoning":
        block: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
    elif item.kind == "text":
        block = {"type": "text", "text": ""}
    else:
        block = {"type": "tool_use", "id": item.tool_id or "", "name": item.tool_name or ""}
        block["input"] = {}
    if item.extra:
        # the fields the engine does not model, where the upstream had them
        block = {**block, **item.extra}
    return block


# --------------------------------------------------------------------------- non-streaming


def message_events(message: Any) -> list[UpstreamEvent]:
    """A complete Messages response as the event sequence its stream would have produced."""
    if not isinstance(message, Mapping):
        raise Malformed("response body is not an object")
    meta = {k: v for k, v in message.items() if k not in ("content", "usage", "stop_reason")}
    events: list[UpstreamEvent] = [
        MessageStarted(
            string(message, "id", required=False),
            string(message, "model", required=False),
            Usage(),
            meta,
        )
    ]
    for index, block in enumerate(items(message, "content")):
        if not isinstance(block, Mapping):
            raise Malformed(f"content[{index}] is not an object")
        events += _block_start(index, block)
        if block.get("type") == "tool_use" and not block.get("input"):
            events.append(ToolArgsDelta(index, "{}"))
        events.append(BlockStopped(index))
    events.append(UsageReported(usage_from(message.get("usage"))))
    if message.get("stop_reason") is not None:
        events.append(finish_from(_STOP_REASONS, message["stop_reason"]))
    events.append(MessageEnded())
    return events


class AnthropicCollector:
    """Engine client items -> one complete Messages response body."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._args: dict[int, list[str]] = {}
        self.error: EmitError | None = None

    def add(self, item: EngineOutput) -> None:
        if isinstance(item, EmitMessageStart):
            self.message = envelope(item)
        elif isinstance(item, EmitBlockStart):
            block = _start(item)
            self._blocks[item.index] = block
            if item.kind == "tool_call":
                self._args[item.index] = []
        elif isinstance(item, EmitDelta | EmitMarker):
            block = self._blocks[item.index]
            if item.kind == "reasoning":
                block["thinking"] += item.text
            elif item.kind == "text":
                block["text"] += item.text
            else:
                self._args[item.index].append(item.text)
        elif isinstance(item, EmitSignature):
            self._blocks[item.index]["signature"] = item.signature
        elif isinstance(item, EmitOpaque):
            if item.index is not None and isinstance(item.payload, Mapping):
                citation = item.payload.get("citation")
                if item.payload.get("type") == "citations_delta" and citation is not None:
                    self._blocks[item.index].setdefault("citations", []).append(citation)
        elif isinstance(item, EmitFinish):
            self.message["stop_reason"] = finish_word(
                _STOP_WORDS, item.reason, item.raw_reason, "end_turn"
            )
            self.message.setdefault("stop_sequence", None)
            self.message["usage"] = usage_to(item.usage)
        elif isinstance(item, EmitError):
            self.error = item

    def result(self) -> dict[str, Any]:
        """The response body; raises :class:`Malformed` when a tool call's input is not JSON."""
        content = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.get("type") == "tool_use" and index in self._args:
                raw = "".join(self._args[index])
                try:
                    block["input"] = json.loads(raw) if raw.strip() else {}
                except ValueError as err:
                    raise Malformed(f"tool call input is not JSON: {err}") from None
            content.append(block)
        return {**self.message, "content": content}
