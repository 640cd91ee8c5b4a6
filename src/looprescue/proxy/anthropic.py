"""Anthropic Messages wire format <-> rescue engine events (FORMAT.md §10.5).

Three pieces, all pure: :class:`AnthropicDecoder` turns upstream SSE events into engine events,
:class:`AnthropicEncoder` turns engine client items into SSE frames, and for non-streaming
requests :func:`message_events` / :class:`AnthropicCollector` do the same for a whole message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

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
    EmitPing,
    EmitSignature,
    FinishReported,
    MessageEnded,
    MessageStarted,
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
from . import jsonfast
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
_FAILURE_TYPES = {
    "transport": "api_error",
    "stall": "api_error",
    "malformed": "api_error",
    "in_band": "api_error",
    "http": "api_error",
}


def usage_from(data: Any) -> Usage:
    if not isinstance(data, Mapping):
        return Usage()
    return Usage(
        input_tokens=_int(data.get("input_tokens")),
        output_tokens=_int(data.get("output_tokens")),
        cache_read_tokens=_int(data.get("cache_read_input_tokens")),
        cache_write_tokens=_int(data.get("cache_creation_input_tokens")),
    )


def usage_to(usage: Usage) -> dict[str, int]:
    out: dict[str, int] = {}
    if usage.input_tokens is not None:
        out["input_tokens"] = usage.input_tokens
    if usage.cache_write_tokens is not None:
        out["cache_creation_input_tokens"] = usage.cache_write_tokens
    if usage.cache_read_tokens is not None:
        out["cache_read_input_tokens"] = usage.cache_read_tokens
    out["output_tokens"] = usage.output_tokens or 0
    return out


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def stop_reason_of(raw: Any) -> FinishReported:
    word = raw if isinstance(raw, str) else None
    return FinishReported(_STOP_REASONS.get(word or "", "other"), word)


class AnthropicDecoder:
    """Upstream SSE events -> engine events. Errors become :class:`UpstreamFailed`."""

    def decode(self, sse: SSEEvent) -> list[UpstreamEvent]:
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
        except (KeyError, TypeError, ValueError) as err:
            return [UpstreamFailed("malformed", f"{sse.describe()}: bad {kind} payload: {err!r}")]

    def _decode(self, kind: str, data: dict[str, Any]) -> list[UpstreamEvent]:
        if kind == "message_start":
            message = data["message"]
            meta = {k: v for k, v in message.items() if k not in ("content", "usage")}
            return [
                MessageStarted(
                    str(message.get("id", "")),
                    str(message.get("model", "")),
                    usage_from(message.get("usage")),
                    meta,
                )
            ]
        if kind == "content_block_start":
            return _block_start(int(data["index"]), data["content_block"])
        if kind == "content_block_delta":
            return _block_delta(int(data["index"]), data["delta"])
        if kind == "content_block_stop":
            return [BlockStopped(int(data["index"]))]
        if kind == "message_delta":
            out: list[UpstreamEvent] = []
            delta = data.get("delta") or {}
            if delta.get("stop_reason") is not None:
                out.append(stop_reason_of(delta["stop_reason"]))
            if isinstance(data.get("usage"), Mapping):
                out.append(UsageReported(usage_from(data["usage"])))
            return out
        if kind == "message_stop":
            return [MessageEnded()]
        if kind == "ping":
            return [Ping()]
        if kind == "error":
            error = data.get("error") or {}
            return [
                UpstreamFailed(
                    "in_band",
                    str(error.get("message", "upstream error")),
                    error_type=error.get("type") if isinstance(error.get("type"), str) else None,
                )
            ]
        return []  # unknown event types are ignored, as DSH does


def _block_start(index: int, block: Mapping[str, Any]) -> list[UpstreamEvent]:
    block_type = block.get("type")
    if block_type == "thinking":
        out: list[UpstreamEvent] = [BlockStarted(index, "reasoning")]
        if block.get("thinking"):
            out.append(ReasoningDelta(index, block["thinking"]))
        if block.get("signature"):
            out.append(SignatureDelta(index, block["signature"]))
        return out
    if block_type == "text":
        out = [BlockStarted(index, "text")]
        if block.get("text"):
            out.append(TextDelta(index, block["text"]))
        return out
    if block_type == "tool_use":
        out = [BlockStarted(index, "tool_call", str(block["id"]), str(block["name"]))]
        initial = block.get("input")
        if initial:
            out.append(ToolArgsDelta(index, json.dumps(initial, ensure_ascii=False)))
        return out
    raise ValueError(f"unsupported content block type {block_type!r}")


def _block_delta(index: int, delta: Mapping[str, Any]) -> list[UpstreamEvent]:
    delta_type = delta.get("type")
    if delta_type == "thinking_delta":
        return [ReasoningDelta(index, str(delta["thinking"]))]
    if delta_type == "text_delta":
        return [TextDelta(index, str(delta["text"]))]
    if delta_type == "input_json_delta":
        return [ToolArgsDelta(index, str(delta["partial_json"]))]
    if delta_type == "signature_delta":
        return [SignatureDelta(index, str(delta["signature"]))]
    return []


# --------------------------------------------------------------------------- encoding


class AnthropicEncoder:
    """Engine client items -> SSE frames (``event:`` line + ``data:`` line, as DSH expects)."""

    def encode(self, item: ClientItem) -> bytes:
        if type(item) is EmitDelta:
            # the per-chunk case, spelled out: the same bytes as _frame() of the dict below
            return b"".join(
                (
                    _DELTA_HEAD,
                    str(item.index).encode(),
                    _DELTA_KIND[item.kind],
                    jsonfast.dumps(item.text),
                    b"}}\n\n",
                )
            )
        if isinstance(item, EmitDelta | EmitMarker):
            return _frame(
                {"type": "content_block_delta", "index": item.index, "delta": _delta(item)}
            )
        if isinstance(item, EmitMessageStart):
            message = {
                "id": item.message_id,
                "type": "message",
                "role": "assistant",
                "model": item.model,
                **{k: v for k, v in item.meta.items() if k not in ("id", "model")},
                "content": [],
                "usage": usage_to(item.usage),
            }
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
        if isinstance(item, EmitPing):
            return _frame({"type": "ping"})
        if isinstance(item, EmitFinish):
            word = item.raw_reason or _STOP_WORDS.get(item.reason, "end_turn")
            delta = {
                "type": "message_delta",
                "delta": {"stop_reason": word, "stop_sequence": None},
                "usage": usage_to(item.usage),
            }
            return _frame(delta) + _frame({"type": "message_stop"})
        if isinstance(item, EmitError):
            return _frame(error_body(item))
        raise TypeError(f"not a client item: {item!r}")


_DELTA_HEAD = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
_DELTA_KIND = {
    "reasoning": b',"delta":{"type":"thinking_delta","thinking":',
    "text": b',"delta":{"type":"text_delta","text":',
    "tool_call": b',"delta":{"type":"input_json_delta","partial_json":',
}


def error_body(item: EmitError) -> dict[str, Any]:
    error_type = item.error_type or _FAILURE_TYPES.get(item.kind, "api_error")
    return {"type": "error", "error": {"type": error_type, "message": item.message}}


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
    if item.kind == "reasoning":
        return {"type": "thinking", "thinking": "", "signature": ""}
    if item.kind == "text":
        return {"type": "text", "text": ""}
    return {"type": "tool_use", "id": item.tool_id or "", "name": item.tool_name or "", "input": {}}


# --------------------------------------------------------------------------- non-streaming


def message_events(message: Mapping[str, Any]) -> list[UpstreamEvent]:
    """A complete Messages response as the event sequence its stream would have produced."""
    meta = {k: v for k, v in message.items() if k not in ("content", "usage", "stop_reason")}
    events: list[UpstreamEvent] = [
        MessageStarted(str(message.get("id", "")), str(message.get("model", "")), Usage(), meta)
    ]
    for index, block in enumerate(message.get("content") or ()):
        block_type = block.get("type")
        if block_type == "thinking":
            events.append(BlockStarted(index, "reasoning"))
            if block.get("thinking"):
                events.append(ReasoningDelta(index, block["thinking"]))
            if block.get("signature"):
                events.append(SignatureDelta(index, block["signature"]))
        elif block_type == "text":
            events.append(BlockStarted(index, "text"))
            if block.get("text"):
                events.append(TextDelta(index, block["text"]))
        elif block_type == "tool_use":
            events.append(BlockStarted(index, "tool_call", str(block["id"]), str(block["name"])))
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            events.append(ToolArgsDelta(index, arguments))
        else:
            raise ValueError(f"content[{index}]: unsupported content block type {block_type!r}")
        events.append(BlockStopped(index))
    events.append(UsageReported(usage_from(message.get("usage"))))
    if message.get("stop_reason") is not None:
        events.append(stop_reason_of(message["stop_reason"]))
    events.append(MessageEnded())
    return events


class AnthropicCollector:
    """Engine client items -> one complete Messages response body."""

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._args: dict[int, list[str]] = {}
        self.error: EmitError | None = None

    def add(self, item: ClientItem) -> None:
        if isinstance(item, EmitMessageStart):
            self.message = {
                "id": item.message_id,
                "type": "message",
                "role": "assistant",
                "model": item.model,
                **{k: v for k, v in item.meta.items() if k not in ("id", "model")},
            }
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
        elif isinstance(item, EmitFinish):
            self.message["stop_reason"] = item.raw_reason or _STOP_WORDS.get(
                item.reason, "end_turn"
            )
            self.message.setdefault("stop_sequence", None)
            self.message["usage"] = usage_to(item.usage)
        elif isinstance(item, EmitError):
            self.error = item

    def result(self) -> dict[str, Any]:
        content = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block["type"] == "tool_use":
                raw = "".join(self._args[index])
                block["input"] = json.loads(raw) if raw.strip() else {}
            content.append(block)
        return {**self.message, "content": content}
