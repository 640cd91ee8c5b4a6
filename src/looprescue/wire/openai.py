"""OpenAI Chat Completions on the wire (FORMAT.md §11.3): :class:`OpenAIWire`.

Chat Completions streams have no block boundaries: the decoder synthesises them (a block per
run of ``reasoning_content`` / ``content`` deltas, one per tool call) so the engine sees the
same shape as with Anthropic, and the encoder drops them again. Only ``n == 1`` responses are
rescued (other requests are relayed untouched). Providers name the reasoning field
differently; the wire remembers the first one the upstream used and mirrors it back.
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
from .base import (
    LIGHT_EFFORTS,
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
from .frames import FrameMismatch, OpenAIChunk, decode_openai_chunk
from .history import openai_history
from .sse import SSEEvent, format_event

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "max_tokens",
}
_FINISH_WORDS = {"stop": "stop", "tool_calls": "tool_calls", "max_tokens": "length"}
ERROR_TYPE = "server_error"
_REASONING_FIELDS = ("reasoning_content", "reasoning")
# what the engine models of a chunk, a choice and a delta; the rest is passed on
_ENVELOPE_FIELDS = frozenset({"id", "object", "model", "choices", "usage", "error"})
_CHOICE_FIELDS = frozenset({"index", "delta", "message", "finish_reason"})
_DELTA_FIELDS = frozenset({"role", "content", "tool_calls", *_REASONING_FIELDS})
_USAGE_COUNTS = frozenset({"prompt_tokens", "completion_tokens", "total_tokens"})


def usage_from(data: Any) -> Usage:
    if not isinstance(data, Mapping):
        return Usage()
    prompt = count(data.get("prompt_tokens"))
    details = data.get("prompt_tokens_details")
    cached = count(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    uncached = None if prompt is None else max(0, prompt - (cached or 0))
    extra = {k: v for k, v in data.items() if k not in _USAGE_COUNTS and v is not None}
    total, completion = count(data.get("total_tokens")), count(data.get("completion_tokens"))
    if total is not None and total != (prompt or 0) + (completion or 0):
        extra["total_tokens"] = total  # a total of the upstream's own making: kept as it is
    if isinstance(details, Mapping):
        # the cached count is modeled (cache_read_tokens); the other details pass on
        rest = {k: v for k, v in details.items() if k != "cached_tokens"}
        if rest:
            extra["prompt_tokens_details"] = rest
        else:
            extra.pop("prompt_tokens_details", None)
    return Usage(
        input_tokens=uncached,
        output_tokens=completion,
        cache_read_tokens=cached,
        extra=extra,
    )


def usage_to(usage: Usage) -> dict[str, Any]:
    prompt = (usage.input_tokens or 0) + (usage.cache_read_tokens or 0)
    completion = usage.output_tokens or 0
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        **usage.extra,
    }
    if usage.cache_read_tokens is not None:
        details = out.get("prompt_tokens_details")
        base = dict(details) if isinstance(details, Mapping) else {}
        out["prompt_tokens_details"] = {**base, "cached_tokens": usage.cache_read_tokens}
    return out


def unmodeled(data: Mapping[str, Any], modeled: frozenset[str]) -> dict[str, Any]:
    """The fields of ``data`` the engine does not model (a null says nothing: left out)."""
    return {k: v for k, v in data.items() if k not in modeled and v is not None}


def error_body(item: EmitError) -> dict[str, Any]:
    error = {"message": item.message, "type": item.error_type or ERROR_TYPE}
    return {"error": {**error, "param": None, "code": None}}


def envelope(item: EmitMessageStart, kind: str) -> dict[str, Any]:
    """The fields every chunk (``chat.completion.chunk``) or the whole completion carries:
    the upstream's own (its first chunk's), ``id``, ``object`` and ``model`` set here."""
    out = {
        "id": item.message_id,
        "object": kind,
        "created": item.meta.get("created", 0),
        "model": item.model,
    }
    out.update((k, v) for k, v in item.meta.items() if k != "role_delta" and k not in out)
    return out


class OpenAIWire(Wire):
    name = "openai"
    end_marker = b"[DONE]"

    def __init__(self, body: Mapping[str, Any] | None = None) -> None:
        options = body.get("stream_options") if body is not None else None
        self.include_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
        # the reasoning field name the upstream used (at most one entry)
        self.reasoning_field: list[str] = []

    @property
    def reasoning_key(self) -> str:
        return self.reasoning_field[0] if self.reasoning_field else "reasoning_content"

    def decoder(self) -> OpenAIDecoder:
        return OpenAIDecoder(self.reasoning_field)

    def encoder(self) -> OpenAIEncoder:
        return OpenAIEncoder(self.include_usage, self.reasoning_field)

    def collector(self) -> OpenAICollector:
        return OpenAICollector(self.reasoning_field)

    def whole_events(self, message: Any) -> list[UpstreamEvent]:
        events, fields = completion_events(message)
        if fields and not self.reasoning_field:
            self.reasoning_field.extend(fields)
        return events

    def error_body(self, error: EmitError) -> dict[str, Any]:
        return error_body(error)

    def request_problem(self, body: Mapping[str, Any]) -> str | None:
        problem = check_messages(body, (str, list))
        if problem is None and not isinstance(body.get("stream_options"), Mapping | None):
            problem = "stream_options: must be an object"
        return problem

    def rescues(self, body: Mapping[str, Any]) -> bool:
        return body.get("n") in (None, 1)

    def tool_history(self, body: Mapping[str, Any]) -> list[Any]:
        from ..guard.history import openai_tool_history

        return openai_tool_history(body)

    def with_user_text(self, body: Mapping[str, Any], text: str) -> dict[str, Any]:
        return {
            **body,
            "messages": [*(body.get("messages") or ()), {"role": "user", "content": text}],
        }

    def with_assistant_text(self, body: Mapping[str, Any], kept: KeptWork) -> dict[str, Any]:
        messages = list(body.get("messages") or ())
        assistant: dict[str, Any] = {"role": "assistant", "content": kept.text}
        if any(
            isinstance(m, Mapping) and m.get("role") == "assistant" and "reasoning_content" in m
            for m in messages
        ):
            # DeepSeek's thinking mode wants reasoning_content on every assistant message.
            assistant["reasoning_content"] = kept.reasoning
        return {**body, "messages": [*messages, assistant]}

    def with_retry_overrides(
        self, body: Mapping[str, Any], config: LoopRescueConfig
    ) -> dict[str, Any]:
        out = dict(body)
        if config.retryTemperature is not None:
            out["temperature"] = config.retryTemperature
        if config.retryReasoningEffort is not None:
            out["reasoning_effort"] = config.retryReasoningEffort
        if config.retryFrequencyPenalty is not None:
            out["frequency_penalty"] = config.retryFrequencyPenalty
        if config.retryPresencePenalty is not None:
            out["presence_penalty"] = config.retryPresencePenalty
        return out

    def with_lighter_reasoning(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``reasoning_effort`` low where the request sets a higher one; DeepSeek-style
        thinking switches (``thinking.type``, ``enable_thinking``, the chat template's
        ``enable_thinking`` / ``thinking``) off where the request turned them on. A request
        that sets none of them is left alone: a model that does not reason rejects them."""
        out = dict(body)
        effort = body.get("reasoning_effort")
        if isinstance(effort, str) and effort not in LIGHT_EFFORTS:
            out["reasoning_effort"] = "low"
        thinking = body.get("thinking")
        if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
            out["thinking"] = {**thinking, "type": "disabled"}
        if body.get("enable_thinking") is True:
            out["enable_thinking"] = False
        template = body.get("chat_template_kwargs")
        if isinstance(template, Mapping):
            switches = ("enable_thinking", "thinking")
            switched = {k: False for k in switches if template.get(k) is True}
            if switched:
                out["chat_template_kwargs"] = {**template, **switched}
        return out

    def output_budget(self, body: Mapping[str, Any]) -> int | None:
        field = _budget_field(body)
        return count(body.get(field)) if field else None

    def with_output_budget(self, body: Mapping[str, Any], tokens: int) -> dict[str, Any]:
        field = _budget_field(body)
        return {**body, field: tokens} if field else dict(body)

    def prune_history(
        self, body: Mapping[str, Any], pruner: HistoryPruner
    ) -> tuple[dict[str, Any] | None, list[HistoryCut]]:
        return openai_history(body, pruner, _REASONING_FIELDS)


def _budget_field(body: Mapping[str, Any]) -> str | None:
    # max_completion_tokens replaced max_tokens; a request may carry either (or both)
    for field in ("max_completion_tokens", "max_tokens"):
        if body.get(field) is not None:
            return field
    return None


# --------------------------------------------------------------------------- decoding


class _BlockTracker:
    """Synthesises block boundaries for a flat Chat Completions delta stream."""

    def __init__(self) -> None:
        self.next_index = 0
        self.current: tuple[str, int] | None = None  # open reasoning/text run
        self.tools: dict[int, int] = {}  # tool_calls[].index -> block index
        self.open_tools: list[int] = []

    def channel_block(self, kind: str) -> list[UpstreamEvent]:
        if self.current is not None and self.current[0] == kind:
            return []
        out = self.close_run()
        index = self.next_index
        self.next_index += 1
        self.current = (kind, index)
        out.append(BlockStarted(index, kind))  # type: ignore[arg-type]
        return out

    def close_run(self) -> list[UpstreamEvent]:
        if self.current is None:
            return []
        index = self.current[1]
        self.current = None
        return [BlockStopped(index)]

    def close_all(self) -> list[UpstreamEvent]:
        out = self.close_run()
        out += [BlockStopped(index) for index in self.open_tools]
        self.open_tools = []
        return out


def _delta_events(
    delta: Mapping[str, Any], blocks: _BlockTracker, fields: list[str]
) -> list[UpstreamEvent]:
    reasoning, field = "", ""
    for key in _REASONING_FIELDS:
        piece = delta.get(key)
        if isinstance(piece, str) and piece:
            reasoning, field = piece, key
            break
    content = delta.get("content")
    out = _text_events(
        reasoning, field, content if isinstance(content, str) else "", blocks, fields
    )
    for call in items(delta, "tool_calls"):
        if not isinstance(call, Mapping):
            raise Malformed("tool_calls[] entry is not an object")
        position = index_of(call) if "index" in call else 0
        function = obj(call, "function", required=False)
        if position not in blocks.tools:
            out += blocks.close_run()
            index = blocks.next_index
            blocks.next_index += 1
            blocks.tools[position] = index
            blocks.open_tools.append(index)
            tool_id = call.get("id")
            name = function.get("name")
            out.append(
                BlockStarted(
                    index,
                    "tool_call",
                    tool_id if isinstance(tool_id, str) else "",
                    name if isinstance(name, str) else None,
                )
            )
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            out.append(ToolArgsDelta(blocks.tools[position], arguments))
    return out


def _text_events(
    reasoning: str, field: str, content: str, blocks: _BlockTracker, fields: list[str]
) -> list[UpstreamEvent]:
    """A delta's reasoning (from its ``field``) and text, each in its block; ``fields``
    remembers the first reasoning field the upstream used."""
    out: list[UpstreamEvent] = []
    if reasoning:
        if not fields:
            fields.append(field)
        out += blocks.channel_block("reasoning")
        out.append(ReasoningDelta(blocks.current[1], reasoning))  # type: ignore[index]
    if content:
        out += blocks.channel_block("text")
        out.append(TextDelta(blocks.current[1], content))  # type: ignore[index]
    return out


class OpenAIDecoder:
    """Upstream ``data:`` lines -> engine events. Errors become :class:`UpstreamFailed`."""

    def __init__(self, reasoning_field: list[str] | None = None) -> None:
        self._blocks = _BlockTracker()
        self._started = False
        self.reasoning_field = reasoning_field if reasoning_field is not None else []

    def decode(self, sse: SSEEvent) -> list[UpstreamEvent]:
        if sse.data.strip() == "[DONE]":
            return [*self._blocks.close_all(), MessageEnded()]
        if self._started:
            # most chunks of a stream: one choice's text, decoded typed in one pass
            # (``frames.py``); any other shape goes the general way below
            try:
                chunk = decode_openai_chunk(sse.data)
            except FrameMismatch:
                pass
            else:
                events = self._text_chunk(chunk)
                if events is not None:
                    return events
        try:
            data = jsonfast.loads(sse.data)
        except ValueError as err:
            return [UpstreamFailed("malformed", f"{sse.describe()}: invalid JSON: {err}")]
        if not isinstance(data, dict):
            return [UpstreamFailed("malformed", f"{sse.describe()}: chunk is not an object")]
        if data.get("error") is not None:
            error = data["error"] if isinstance(data["error"], Mapping) else {}
            message = error.get("message")
            if not isinstance(message, str):
                message = str(data["error"])[:200]
            kind = error.get("type")
            return [
                UpstreamFailed(
                    "in_band", message, error_type=kind if isinstance(kind, str) else None
                )
            ]
        try:
            return self._chunk(data)
        except (Malformed, KeyError, TypeError, ValueError) as err:
            return [UpstreamFailed("malformed", f"{sse.describe()}: bad chunk: {err}")]

    def _text_chunk(self, chunk: OpenAIChunk) -> list[UpstreamEvent] | None:
        """The events of a typed chunk (``_text_events``, as on the general path); None for a
        chunk that is not one choice at index 0 with a delta (the general path decides those)."""
        choices = chunk.choices
        if len(choices) != 1:
            return None
        choice = choices[0]
        delta = choice.delta
        if delta is None or choice.index != 0:
            return None
        if delta.reasoning_content:
            reasoning, field = delta.reasoning_content, "reasoning_content"
        else:
            reasoning, field = delta.reasoning or "", "reasoning"
        return _text_events(
            reasoning, field, delta.content or "", self._blocks, self.reasoning_field
        )

    def _chunk(self, data: dict[str, Any]) -> list[UpstreamEvent]:
        out: list[UpstreamEvent] = []
        choices = items(data, "choices")
        if not self._started:
            self._started = True
            meta: dict[str, Any] = unmodeled(data, _ENVELOPE_FIELDS)
            first = choices[0] if choices and isinstance(choices[0], Mapping) else {}
            first_delta = obj(first, "delta", required=False)
            meta["role_delta"] = {
                k: first_delta[k]
                for k in ("role", "content", *_REASONING_FIELDS)
                if k in first_delta and not first_delta[k]
            } or {"role": "assistant"}
            meta["role_delta"].setdefault("role", "assistant")
            out.append(
                MessageStarted(
                    string(data, "id", required=False) if isinstance(data.get("id"), str) else "",
                    string(data, "model", required=False)
                    if isinstance(data.get("model"), str)
                    else "",
                    Usage(),
                    meta,
                )
            )
        passed: list[Any] = []  # what of the choices the engine does not model
        finish: list[UpstreamEvent] = []
        for choice in choices:
            if not isinstance(choice, Mapping):
                raise Malformed("choices[] entry is not an object")
            if (index_of(choice) if "index" in choice else 0) != 0:
                passed.append(choice)  # another choice: the engine watches the first
                continue
            delta = obj(choice, "delta", required=False)
            out += _delta_events(delta, self._blocks, self.reasoning_field)
            rest = unmodeled(choice, _CHOICE_FIELDS)
            rest_delta = unmodeled(delta, _DELTA_FIELDS)
            if rest or rest_delta:  # a refusal, annotations, logprobs, audio, ...
                passed.insert(0, {"index": choice.get("index", 0), "delta": rest_delta, **rest})
            if choice.get("finish_reason") is not None:
                # the finish first: one that says the answer looped acts on its open blocks
                finish = [
                    finish_from(_FINISH_REASONS, choice["finish_reason"]),
                    *self._blocks.close_all(),
                ]
        if passed:
            out.append(Opaque(None, {"choices": passed}))
        out += finish
        if isinstance(data.get("usage"), Mapping):
            out.append(UsageReported(usage_from(data["usage"])))
        return out


# --------------------------------------------------------------------------- encoding


class OpenAIEncoder:
    """Engine client items -> ``data:`` lines of chat.completion.chunk objects."""

    def __init__(self, include_usage: bool, reasoning_field: list[str] | None = None) -> None:
        self.include_usage = include_usage
        self._reasoning_field = reasoning_field if reasoning_field is not None else []
        self._envelope: dict[str, Any] = {}
        self._tool_position: dict[int, int] = {}

    @property
    def reasoning_key(self) -> str:
        return self._reasoning_field[0] if self._reasoning_field else "reasoning_content"

    def _chunk(self, delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            **self._envelope,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def encode(self, item: ClientItem) -> bytes:
        if isinstance(item, EmitDelta | EmitMarker):
            return _line(self._chunk(self._delta(item)))
        if isinstance(item, EmitMessageStart):
            role_delta = item.meta.get("role_delta", {"role": "assistant"})
            self._envelope = envelope(item, "chat.completion.chunk")
            return _line(self._chunk(role_delta))
        if isinstance(item, EmitBlockStart):
            if item.kind != "tool_call":
                return b""
            position = len(self._tool_position)
            self._tool_position[item.index] = position
            call = {
                "index": position,
                "id": item.tool_id or "",
                "type": "function",
                "function": {"name": item.tool_name or "", "arguments": ""},
            }
            return _line(self._chunk({"tool_calls": [call]}))
        if isinstance(item, EmitOpaque):
            return _line({**self._envelope, **item.payload})
        if isinstance(item, EmitSignature | EmitBlockStop):
            return b""
        if isinstance(item, EmitPing):
            return b": ping\n\n"
        if isinstance(item, EmitFinish):
            word = finish_word(_FINISH_WORDS, item.reason, item.raw_reason, "stop")
            out = _line(self._chunk({}, word))
            if self.include_usage and item.usage != Usage():
                # only what the upstream reported: no invented zero counts
                out += _line({**self._envelope, "choices": [], "usage": usage_to(item.usage)})
            return out + format_event("[DONE]")
        if isinstance(item, EmitError):
            return _line(error_body(item))
        raise TypeError(f"not a client item: {item!r}")

    def _delta(self, item: EmitDelta | EmitMarker) -> dict[str, Any]:
        if item.kind == "reasoning":
            return {self.reasoning_key: item.text}
        if item.kind == "text":
            return {"content": item.text}
        position = self._tool_position[item.index]
        return {"tool_calls": [{"index": position, "function": {"arguments": item.text}}]}


def _line(data: Mapping[str, Any]) -> bytes:
    return b"data: " + jsonfast.dumps(data) + b"\n\n"


# --------------------------------------------------------------------------- non-streaming


def completion_events(body: Any) -> tuple[list[UpstreamEvent], list[str]]:
    """A complete chat.completion as the event sequence its stream would have produced;
    also returns the reasoning field name it used (empty when none)."""
    if not isinstance(body, Mapping):
        raise Malformed("response body is not an object")
    meta = unmodeled(body, _ENVELOPE_FIELDS)
    events: list[UpstreamEvent] = [
        MessageStarted(
            string(body, "id", required=False), string(body, "model", required=False), Usage(), meta
        )
    ]
    choices = items(body, "choices")
    if not choices or not isinstance(choices[0], Mapping):
        raise Malformed("completion has no choices")
    choice = choices[0]
    message = obj(choice, "message", required=False)
    blocks = _BlockTracker()
    fields: list[str] = []
    delta: dict[str, Any] = {k: message[k] for k in (*_REASONING_FIELDS, "content") if k in message}
    tool_calls = []
    for position, call in enumerate(items(message, "tool_calls")):
        if not isinstance(call, Mapping):
            raise Malformed(f"tool_calls[{position}] is not an object")
        tool_calls.append({**call, "index": position})
    delta["tool_calls"] = tool_calls
    events += _delta_events(delta, blocks, fields)
    # what the engine does not model (a refusal, annotations, logprobs, other choices)
    passed: list[Any] = [c for c in choices[1:]]
    rest = unmodeled(choice, _CHOICE_FIELDS)
    rest_message = unmodeled(message, _DELTA_FIELDS)
    if rest or rest_message:
        passed.insert(0, {"index": choice.get("index", 0), "message": rest_message, **rest})
    if passed:
        events.append(Opaque(None, {"choices": passed}))
    if isinstance(body.get("usage"), Mapping):
        events.append(UsageReported(usage_from(body["usage"])))
    if choice.get("finish_reason") is not None:
        # before the blocks close, as a stream's finish comes (it may say the answer looped)
        events.append(finish_from(_FINISH_REASONS, choice["finish_reason"]))
    events += blocks.close_all()
    events.append(MessageEnded())
    return events, fields


class OpenAICollector:
    """Engine client items -> one complete chat.completion body."""

    def __init__(self, reasoning_field: list[str] | None = None) -> None:
        self._reasoning_field = reasoning_field if reasoning_field is not None else []
        self.completion: dict[str, Any] = {}
        self._reasoning: list[str] = []
        self._text: list[str] = []
        self._tools: dict[int, dict[str, Any]] = {}
        self._finish = "stop"
        self._usage: dict[str, Any] | None = None
        self._passed: list[Any] = []  # the choices' fields the engine does not model
        self.error: EmitError | None = None

    def add(self, item: EngineOutput) -> None:
        if isinstance(item, EmitMessageStart):
            self.completion = envelope(item, "chat.completion")
        elif isinstance(item, EmitBlockStart) and item.kind == "tool_call":
            self._tools[item.index] = {
                "id": item.tool_id or "",
                "type": "function",
                "function": {"name": item.tool_name or "", "arguments": ""},
            }
        elif isinstance(item, EmitDelta | EmitMarker):
            if item.kind == "reasoning":
                self._reasoning.append(item.text)
            elif item.kind == "text":
                self._text.append(item.text)
            else:
                self._tools[item.index]["function"]["arguments"] += item.text
        elif isinstance(item, EmitFinish):
            self._finish = finish_word(_FINISH_WORDS, item.reason, item.raw_reason, "stop")
            self._usage = usage_to(item.usage)
        elif isinstance(item, EmitOpaque):
            if isinstance(item.payload, Mapping):
                self._passed += items(item.payload, "choices")
        elif isinstance(item, EmitError):
            self.error = item

    def result(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        if self._reasoning:
            key = self._reasoning_field[0] if self._reasoning_field else "reasoning_content"
            message[key] = "".join(self._reasoning)
        if self._tools:
            message["tool_calls"] = [self._tools[i] for i in sorted(self._tools)]
        first: dict[str, Any] = {"index": 0, "message": message, "logprobs": None}
        choices = [first]
        for passed in self._passed:
            if not isinstance(passed, Mapping):
                continue
            if passed.get("index", 0) == 0:
                # the first choice's own fields: its message's, and its own
                message.update(passed.get("message") or {})
                first.update((k, v) for k, v in passed.items() if k not in _CHOICE_FIELDS)
            else:
                choices.append(dict(passed))
        first["finish_reason"] = self._finish
        out = {**self.completion, "choices": choices}
        if self._usage is not None:
            out["usage"] = self._usage
        return out
