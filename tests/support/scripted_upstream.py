"""A scripted model upstream on 127.0.0.1 for end-to-end tests.

It speaks the two protocols DSH and its peers use (FORMAT.md §10 and §11):

* Anthropic Messages: ``POST /v1/messages`` (streaming SSE and plain JSON);
* OpenAI Chat Completions: ``POST /v1/chat/completions`` and ``POST /chat/completions``;
* OpenAI Responses: ``POST /v1/responses`` (what Codex CLI speaks; streaming and plain JSON).

A script is a queue of :class:`ScriptedResponse`; each request consumes the first queued
response whose ``match`` accepts it. DSH's title side requests are answered by a standing rule
and never consume the script. When the script runs out, a short default text is sent. Every
request is recorded (:class:`RecordedRequest`) for assertions.

Usage::

    with ScriptedUpstream([ScriptedResponse(reasoning="Let me see.", text="Hello.")]) as up:
        client = anthropic.Anthropic(base_url=up.base_url, api_key="k")
        ...
        assert up.agent_requests()[0].path == "/v1/messages"
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
import zstandard
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

REPO_ROOT = Path(__file__).resolve().parents[2]
# The labelled corpora the repository ships: real loops and hard negatives collected from
# public sources, then the answers of a small real model (corpus/README.md).
CORPUS_PATHS = (REPO_ROOT / "corpus" / "dev.jsonl", REPO_ROOT / "corpus" / "smollm2.jsonl")
SESSIONS_PATH = REPO_ROOT / "tests" / "fixtures" / "sessions"

# Body fields DSH adds to native requests (FORMAT.md §10.4); not part of the conversation.
DSH_EXTENSION_FIELDS = ("dsh_session_log", "dsh_plugin_packages")

_TITLE_MARKER = "Generate the session title"

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    529: "overloaded_error",
}
_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}


# --------------------------------------------------------------------------- script model


@dataclass(frozen=True)
class ToolCall:
    """One tool call the scripted model makes; ``arguments`` is a mapping or a JSON string."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))

    def arguments_object(self) -> Any:
        if isinstance(self.arguments, str):
            return json.loads(self.arguments) if self.arguments else {}
        return dict(self.arguments)


@dataclass(frozen=True)
class ScriptedResponse:
    """What the upstream answers to one request.

    Content: ``reasoning`` (thinking / ``reasoning_content``), ``text``, ``tool_calls``.
    Streaming shape: deltas of ``delta_chars`` = (min, max) characters, sizes drawn from
    ``random.Random(seed)`` so a response always streams identically; ``delay`` seconds
    between deltas.

    Faults (events are counted over every SSE frame / ``data:`` line sent, pings included):

    * ``status`` != 200: an HTTP error with ``error_body`` (a protocol-shaped default when
      None) and an optional ``Retry-After`` header;
    * ``cut_after=N``: send N events, then drop the connection (non-streaming: half the body);
    * ``stall_after=N`` + ``stall_seconds``: after N events send nothing for that long, then
      continue (non-streaming: stall before the response);
    * ``error_event_after=N``: after N events send an in-band error (``error_event`` or an
      ``overloaded_error`` default) and end the stream;
    * ``inject_after=N`` + ``inject``: after N events send the raw bytes ``inject`` (say, a
      malformed event), then go on with the rest of the stream;
    * ``raw_body``: non-streaming, send these bytes as the 200 response body;
    * ``raw_frames``: streaming, send these byte strings (one write each) as the whole body
      (a stream of any shape, the upstream's exact bytes).

    ``match`` (a predicate on :class:`RecordedRequest`) limits which requests may consume this
    response; None accepts any request that is not a title side request.
    """

    reasoning: str = ""
    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    delta_chars: tuple[int, int] = (2, 6)
    delay: float = 0.0
    seed: int = 0
    match: Callable[[RecordedRequest], bool] | None = None
    label: str = ""
    status: int = 200
    error_body: Any = None
    retry_after: float | None = None
    cut_after: int | None = None
    stall_after: int | None = None
    stall_seconds: float = 0.0
    error_event_after: int | None = None
    error_event: Mapping[str, Any] | None = None
    inject_after: int | None = None
    inject: bytes = b""
    raw_body: bytes | None = None
    raw_frames: Sequence[bytes] | None = None
    stop_reason: str | None = None
    signature: str | None = ""
    input_tokens: int = 176
    cache_read_tokens: int = 0
    ping: bool = True
    # Anthropic only: content blocks sent as they are before the text, e.g. a server tool's
    # ``server_tool_use`` and ``web_search_tool_result``. A block with an ``input`` streams it
    # as ``input_json_delta``; any other block goes whole in its ``content_block_start``.
    server_blocks: Sequence[Mapping[str, Any]] = ()

    def __post_init__(self) -> None:
        low, high = self.delta_chars
        if not 1 <= low <= high:
            raise ValueError(f"delta_chars must be 1 <= min <= max, got {self.delta_chars}")
        for name in ("cut_after", "stall_after", "error_event_after", "inject_after"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")

    @property
    def output_tokens(self) -> int:
        chars = len(self.reasoning) + len(self.text)
        chars += sum(len(call.arguments_json()) for call in self.tool_calls)
        return max(1, math.ceil(chars / 4))


@dataclass
class RecordedRequest:
    """One request as the upstream received it, plus what it answered."""

    index: int
    method: str
    path: str
    query: str
    headers: dict[str, str]
    raw_body: bytes
    body: Any
    time: float
    protocol: str  # "anthropic" | "openai" | "responses" | "other"
    purpose: str  # "agent" | "title" | "compaction" | "other"
    stream: bool
    answered_with: str = ""
    events_sent: int = 0
    outcome: str = "pending"
    finished_at: float | None = None
    # time.monotonic() just before each SSE event was written (system-wide clock on Linux).
    event_times: list[float] = field(default_factory=list)
    # the client's address and port: requests sharing it came over one (reused) connection
    peer: str = ""

    @property
    def client_disconnected(self) -> bool:
        return self.outcome == "client_disconnected"

    def text(self, include_dsh_extensions: bool = True) -> str:
        """Every string in the JSON body, one per line (see :func:`request_text`)."""
        return request_text(self.body, include_dsh_extensions=include_dsh_extensions)


def request_text(body: Any, include_dsh_extensions: bool = True) -> str:
    """All string leaves of a request body (keys excluded), newline-joined, in order."""
    if include_dsh_extensions or not isinstance(body, Mapping):
        root = body
    else:
        root = {k: v for k, v in body.items() if k not in DSH_EXTENSION_FIELDS}
    parts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            parts.append(node)
        elif isinstance(node, Mapping):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(root)
    return "\n".join(parts)


def is_title_request(request: RecordedRequest) -> bool:
    """DSH's side request that names the session (FORMAT.md §10.2 / §11.2)."""
    return request.purpose == "title"


def purpose_is(purpose: str) -> Callable[[RecordedRequest], bool]:
    """A ``match`` predicate accepting requests of one purpose ("agent", "compaction", ...)."""
    return lambda request: request.purpose == purpose


# --------------------------------------------------------------------------- corpus helpers


def load_corpus(paths: Sequence[Path] = CORPUS_PATHS[:1]) -> list[dict[str, Any]]:
    """The records of ``paths`` in file order; by default the collected corpus alone."""
    records: list[dict[str, Any]] = []
    for path in paths:
        with path.open(encoding="utf-8") as handle:
            records += [json.loads(line) for line in handle if line.strip()]
    return records


def corpus_record(record_id: str, paths: Sequence[Path] = CORPUS_PATHS) -> dict[str, Any]:
    """One record by id, from either corpus."""
    for record in load_corpus(paths):
        if record["id"] == record_id:
            return record
    raise KeyError(f"{', '.join(map(str, paths))}: no record with id {record_id!r}")


def corpus_response(
    record: Mapping[str, Any] | str,
    *,
    answer: str = "Here is the answer.",
    thinking: str = "",
    max_chars: int | None = None,
    **fields: Any,
) -> ScriptedResponse:
    """A response that streams a corpus text in the record's channel.

    A ``reasoning`` record becomes the reasoning, followed by ``answer`` as text; a ``text``
    record becomes the text, preceded by ``thinking`` as reasoning. ``max_chars`` truncates
    the corpus text; other keyword arguments are :class:`ScriptedResponse` fields.
    """
    if isinstance(record, str):
        record = corpus_record(record)
    body = record["text"] if max_chars is None else record["text"][:max_chars]
    label = fields.pop("label", f"corpus:{record['id']}")
    if record["channel"] == "reasoning":
        return ScriptedResponse(reasoning=body, text=answer, label=label, **fields)
    return ScriptedResponse(reasoning=thinking, text=body, label=label, **fields)


def dsh_recorded_requests(scenario: str) -> list[dict[str, Any]]:
    """The requests real DSH sent in a fixture scenario (``upstream-requests.jsonl.zstd`` rows,
    as tests/fixtures/record.py writes them)."""
    path = SESSIONS_PATH / scenario / "upstream-requests.jsonl.zstd"
    text = zstandard.ZstdDecompressor().decompress(path.read_bytes()).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def parse_sse(payload: str | bytes) -> list[tuple[str | None, Any]]:
    """Split an SSE body into (event name or None, data) pairs; JSON data is decoded."""
    text = payload.decode() if isinstance(payload, bytes) else payload
    events: list[tuple[str | None, Any]] = []
    for frame in re.split(r"\r?\n\r?\n", text):
        name: str | None = None
        data_lines: list[str] = []
        for line in frame.splitlines():
            if line.startswith("event:"):
                name = line[len("event:") :].strip()
            elif line.startswith("data:"):
                data_lines.append(line[len("data:") :].removeprefix(" "))
        if not data_lines:
            continue
        data = "\n".join(data_lines)
        try:
            events.append((name, json.loads(data)))
        except ValueError:
            events.append((name, data))
    return events


# --------------------------------------------------------------------------- wire rendering


def split_deltas(text: str, rng: random.Random, delta_chars: tuple[int, int]) -> list[str]:
    low, high = delta_chars
    pieces: list[str] = []
    position = 0
    while position < len(text):
        size = rng.randint(low, high)
        pieces.append(text[position : position + size])
        position += size
    return pieces


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class _Frame:
    data: bytes
    is_delta: bool


def _sse(event_type: str, payload: Mapping[str, Any], is_delta: bool = False) -> _Frame:
    return _Frame(f"event: {event_type}\ndata: {_dumps(payload)}\n\n".encode(), is_delta)


def _openai_line(payload: Mapping[str, Any] | str, is_delta: bool = False) -> _Frame:
    data = payload if isinstance(payload, str) else _dumps(payload)
    return _Frame(f"data: {data}\n\n".encode(), is_delta)


def _stop_reason(response: ScriptedResponse) -> str:
    if response.stop_reason:
        return response.stop_reason
    return "tool_use" if response.tool_calls else "end_turn"


def _finish_reason(response: ScriptedResponse) -> str:
    mapping = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
    reason = _stop_reason(response)
    return mapping.get(reason, reason)


def _signature(response: ScriptedResponse, message_id: str) -> str | None:
    # "" means "make one up", None means "send no signature" (some upstreams send none).
    if response.signature is None:
        return None
    return response.signature or f"scripted-sig-{message_id}"


def _tool_id(prefix: str, message_number: int, position: int, call: ToolCall) -> str:
    return call.id or f"{prefix}_scripted_{message_number:02d}_{position}"


def anthropic_error_body(status: int, message: str | None = None) -> dict[str, Any]:
    error_type = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": error_type, "message": message or error_type}}


def openai_error_body(status: int, message: str | None = None) -> dict[str, Any]:
    error_type = _OPENAI_ERROR_TYPES.get(status, "server_error")
    return {
        "error": {"message": message or error_type, "type": error_type, "param": None, "code": None}
    }


def anthropic_stream_frames(
    response: ScriptedResponse, model: str, message_number: int
) -> list[_Frame]:
    message_id = f"msg_scripted_{message_number}"
    rng = random.Random(response.seed)
    frames = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": response.input_tokens,
                        "output_tokens": 0,
                        "cache_read_input_tokens": response.cache_read_tokens,
                        "cache_creation_input_tokens": 0,
                    },
                },
            },
        )
    ]
    if response.ping:
        frames.append(_sse("ping", {"type": "ping"}))
    index = 0

    def block(start: Mapping[str, Any], deltas: list[Mapping[str, Any]]) -> None:
        nonlocal index
        frames.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        for delta in deltas:
            payload = {"type": "content_block_delta", "index": index, "delta": delta}
            frames.append(_sse("content_block_delta", payload, is_delta=True))
        frames.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1

    if response.reasoning:
        deltas: list[Mapping[str, Any]] = [
            {"type": "thinking_delta", "thinking": piece}
            for piece in split_deltas(response.reasoning, rng, response.delta_chars)
        ]
        signature = _signature(response, message_id)
        if signature is not None:
            deltas.append({"type": "signature_delta", "signature": signature})
        block({"type": "thinking", "thinking": "", "signature": ""}, deltas)
    for server_block in response.server_blocks:
        if "input" in server_block:
            arguments = _dumps(server_block["input"])
            block(
                {**server_block, "input": {}},
                [{"type": "input_json_delta", "partial_json": arguments}],
            )
        else:
            block(server_block, [])
    if response.text:
        block(
            {"type": "text", "text": ""},
            [
                {"type": "text_delta", "text": piece}
                for piece in split_deltas(response.text, rng, response.delta_chars)
            ],
        )
    for position, call in enumerate(response.tool_calls):
        start = {
            "type": "tool_use",
            "id": _tool_id("toolu", message_number, position, call),
            "name": call.name,
            "input": {},
        }
        pieces = split_deltas(call.arguments_json(), rng, response.delta_chars)
        block(start, [{"type": "input_json_delta", "partial_json": piece} for piece in pieces])
    frames.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": _stop_reason(response), "stop_sequence": None},
                "usage": {"output_tokens": response.output_tokens},
            },
        )
    )
    frames.append(_sse("message_stop", {"type": "message_stop"}))
    return frames


def anthropic_message(response: ScriptedResponse, model: str, message_number: int) -> dict:
    message_id = f"msg_scripted_{message_number}"
    content: list[dict[str, Any]] = []
    if response.reasoning:
        thinking: dict[str, Any] = {"type": "thinking", "thinking": response.reasoning}
        signature = _signature(response, message_id)
        thinking["signature"] = signature or ""
        content.append(thinking)
    content.extend(dict(server_block) for server_block in response.server_blocks)
    if response.text:
        content.append({"type": "text", "text": response.text})
    for position, call in enumerate(response.tool_calls):
        content.append(
            {
                "type": "tool_use",
                "id": _tool_id("toolu", message_number, position, call),
                "name": call.name,
                "input": call.arguments_object(),
            }
        )
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _stop_reason(response),
        "stop_sequence": None,
        "usage": {
            "input_tokens": response.input_tokens,
            "output_tokens": response.output_tokens,
            "cache_read_input_tokens": response.cache_read_tokens,
            "cache_creation_input_tokens": 0,
        },
    }


def _openai_usage(response: ScriptedResponse) -> dict[str, Any]:
    prompt = response.input_tokens + response.cache_read_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": response.output_tokens,
        "total_tokens": prompt + response.output_tokens,
        "prompt_tokens_details": {"cached_tokens": response.cache_read_tokens},
    }


def openai_stream_frames(
    response: ScriptedResponse, model: str, message_number: int, include_usage: bool
) -> list[_Frame]:
    rng = random.Random(response.seed)
    created = int(time.time())
    completion_id = f"chatcmpl-scripted-{message_number}"

    def chunk(delta: Mapping[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }

    frames = [_openai_line(chunk({"role": "assistant", "content": None, "reasoning_content": ""}))]
    for piece in split_deltas(response.reasoning, rng, response.delta_chars):
        frames.append(_openai_line(chunk({"reasoning_content": piece}), is_delta=True))
    for piece in split_deltas(response.text, rng, response.delta_chars):
        frames.append(_openai_line(chunk({"content": piece}), is_delta=True))
    for position, call in enumerate(response.tool_calls):
        opening = {
            "index": position,
            "id": _tool_id("call", message_number, position, call),
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        frames.append(_openai_line(chunk({"tool_calls": [opening]}), is_delta=True))
        for piece in split_deltas(call.arguments_json(), rng, response.delta_chars):
            argument = {"index": position, "function": {"arguments": piece}}
            frames.append(_openai_line(chunk({"tool_calls": [argument]}), is_delta=True))
    frames.append(_openai_line(chunk({}, finish_reason=_finish_reason(response))))
    if include_usage:
        usage_chunk = chunk({})
        usage_chunk["choices"] = []
        usage_chunk["usage"] = _openai_usage(response)
        frames.append(_openai_line(usage_chunk))
    frames.append(_openai_line("[DONE]"))
    return frames


def openai_completion(response: ScriptedResponse, model: str, message_number: int) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": response.text or None}
    if response.reasoning:
        message["reasoning_content"] = response.reasoning
    if response.tool_calls:
        message["tool_calls"] = [
            {
                "id": _tool_id("call", message_number, position, call),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }
            for position, call in enumerate(response.tool_calls)
        ]
    return {
        "id": f"chatcmpl-scripted-{message_number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": _finish_reason(response),
            }
        ],
        "usage": _openai_usage(response),
    }


def _responses_usage(response: ScriptedResponse) -> dict[str, Any]:
    prompt = response.input_tokens + response.cache_read_tokens
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": response.cache_read_tokens},
        "output_tokens": response.output_tokens,
        "output_tokens_details": {"reasoning_tokens": max(0, len(response.reasoning) // 4)},
        "total_tokens": prompt + response.output_tokens,
    }


def _responses_items(response: ScriptedResponse, message_number: int) -> list[dict[str, Any]]:
    """The finished output items of a Responses API answer: reasoning, message, calls."""
    items: list[dict[str, Any]] = []
    if response.reasoning:
        items.append(
            {
                "id": f"rs_scripted_{message_number}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": response.reasoning}],
            }
        )
    if response.text:
        items.append(
            {
                "id": f"msg_scripted_{message_number}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": response.text, "annotations": []}],
            }
        )
    for position, call in enumerate(response.tool_calls):
        items.append(
            {
                "id": f"fc_scripted_{message_number}_{position}",
                "type": "function_call",
                "status": "completed",
                "call_id": _tool_id("call", message_number, position, call),
                "name": call.name,
                "arguments": call.arguments_json(),
            }
        )
    return items


def responses_object(
    response: ScriptedResponse, model: str, message_number: int, status: str = "completed"
) -> dict[str, Any]:
    """A whole Responses API ``response`` object (``status`` "in_progress": nothing out yet)."""
    done = status == "completed"
    return {
        "id": f"resp_scripted_{message_number}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": _responses_items(response, message_number) if done else [],
        "usage": _responses_usage(response) if done else None,
        "error": None,
        "incomplete_details": None,
    }


def responses_stream_frames(
    response: ScriptedResponse, model: str, message_number: int
) -> list[_Frame]:
    """A Responses API stream: created, each output item (added, its deltas, done), completed.

    Reasoning goes out as a reasoning summary, the channel Codex shows."""
    rng = random.Random(response.seed)
    frames: list[_Frame] = []
    sequence = itertools.count()

    def event(kind: str, is_delta: bool = False, **payload: Any) -> None:
        body = {"type": kind, "sequence_number": next(sequence), **payload}
        frames.append(_sse(kind, body, is_delta))

    event(
        "response.created",
        response=responses_object(response, model, message_number, "in_progress"),
    )
    event(
        "response.in_progress",
        response=responses_object(response, model, message_number, "in_progress"),
    )
    for index, item in enumerate(_responses_items(response, message_number)):
        item_id = item["id"]
        where = {"item_id": item_id, "output_index": index}
        if item["type"] == "reasoning":
            event("response.output_item.added", output_index=index, item={**item, "summary": []})
            part = {"type": "summary_text", "text": ""}
            event("response.reasoning_summary_part.added", **where, summary_index=0, part=part)
            for piece in split_deltas(response.reasoning, rng, response.delta_chars):
                event(
                    "response.reasoning_summary_text.delta",
                    True,
                    **where,
                    summary_index=0,
                    delta=piece,
                )
            text = response.reasoning
            event("response.reasoning_summary_text.done", **where, summary_index=0, text=text)
            part = {"type": "summary_text", "text": text}
            event("response.reasoning_summary_part.done", **where, summary_index=0, part=part)
        elif item["type"] == "message":
            opening = {**item, "status": "in_progress", "content": []}
            event("response.output_item.added", output_index=index, item=opening)
            part = {"type": "output_text", "text": "", "annotations": []}
            event("response.content_part.added", **where, content_index=0, part=part)
            for piece in split_deltas(response.text, rng, response.delta_chars):
                event("response.output_text.delta", True, **where, content_index=0, delta=piece)
            text = response.text
            event("response.output_text.done", **where, content_index=0, text=text)
            part = {"type": "output_text", "text": text, "annotations": []}
            event("response.content_part.done", **where, content_index=0, part=part)
        else:
            opening = {**item, "status": "in_progress", "arguments": ""}
            event("response.output_item.added", output_index=index, item=opening)
            for piece in split_deltas(item["arguments"], rng, response.delta_chars):
                event("response.function_call_arguments.delta", True, **where, delta=piece)
            arguments = item["arguments"]
            event("response.function_call_arguments.done", **where, arguments=arguments)
        event("response.output_item.done", output_index=index, item=item)
    event("response.completed", response=responses_object(response, model, message_number))
    return frames


# --------------------------------------------------------------------------- request analysis


def _protocol_of(path: str) -> str:
    if path.rstrip("/").endswith("/messages"):
        return "anthropic"
    if path.rstrip("/").endswith("/chat/completions"):
        return "openai"
    if path.rstrip("/").endswith("/responses"):
        return "responses"
    return "other"


def _purpose_of(protocol: str, headers: Mapping[str, str], body: Any) -> str:
    if protocol == "other" or not isinstance(body, Mapping):
        return "other"
    if headers.get("x-deepseek-harness-compact") == "1":
        return "compaction"
    messages = body.get("messages")
    if isinstance(messages, list) and messages:
        first_user = next(
            (m for m in messages if isinstance(m, Mapping) and m.get("role") == "user"), None
        )
        if first_user is not None and _TITLE_MARKER in request_text(first_user.get("content")):
            return "title"
    return "agent"


def title_for(request: RecordedRequest) -> str:
    """A short title from the human messages quoted in a DSH title request."""
    text = request_text(request.body, include_dsh_extensions=False)
    _, _, quoted = text.partition("human messages:")
    words: list[str] = []
    try:
        prompts = json.loads(quoted.strip().splitlines()[0]) if quoted.strip() else []
        first = prompts[0]["text"] if prompts else ""
        first = re.sub(r"SCENARIO:\S+", "", first)
        words = re.findall(r"[\w'-]+", first)[:5]
    except (ValueError, LookupError, TypeError):
        words = []
    return " ".join(words).capitalize() if words else "Scripted session"


# --------------------------------------------------------------------------- the server


class _ConnectionCut(Exception):
    """Raised inside the app to make uvicorn drop the connection mid-response."""


class _QuietCuts(logging.Filter):
    """Keeps uvicorn from logging a traceback for connections we cut on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _ConnectionCut)


def _install_quiet_cuts() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietCuts) for f in logger.filters):
        logger.addFilter(_QuietCuts())


Rule = Callable[[RecordedRequest], "ScriptedResponse"]


class ScriptedUpstream:
    """A real HTTP server on 127.0.0.1 (ephemeral port) replaying a script; see module doc."""

    def __init__(
        self,
        script: Sequence[ScriptedResponse] = (),
        *,
        answer_titles: bool = True,
        default_text: str = "Done.",
        graceful_shutdown_seconds: float = 3.0,
        tls: tuple[str, str] | None = None,
    ) -> None:
        """``tls``: (certificate file, key file) to serve HTTPS instead of HTTP."""
        self._lock = threading.Lock()
        self._queue: list[ScriptedResponse] = list(script)
        self._rules: list[tuple[Callable[[RecordedRequest], bool], Rule, str]] = []
        self._requests: list[RecordedRequest] = []
        self._request_numbers = itertools.count()
        self._stopping = threading.Event()
        self.default_text = default_text
        self._graceful = graceful_shutdown_seconds
        self._tls = tls
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None
        if answer_titles:
            self.add_rule(
                is_title_request,
                lambda request: ScriptedResponse(text=title_for(request), label="title"),
                label="title",
            )

    # ----- script management (thread-safe; callable while the server runs)

    def enqueue(self, *responses: ScriptedResponse) -> None:
        with self._lock:
            self._queue.extend(responses)

    def add_rule(
        self,
        predicate: Callable[[RecordedRequest], bool],
        response: ScriptedResponse | Rule,
        label: str = "rule",
    ) -> None:
        """Answer every request matching ``predicate`` without consuming the script."""
        make = response if callable(response) else (lambda _request, fixed=response: fixed)
        with self._lock:
            self._rules.append((predicate, make, label))

    @property
    def remaining(self) -> int:
        """Scripted responses not consumed yet."""
        with self._lock:
            return len(self._queue)

    # ----- recordings

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def requests_for(self, purpose: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.purpose == purpose]

    def agent_requests(self) -> list[RecordedRequest]:
        return self.requests_for("agent")

    def sent_text(self, include_dsh_extensions: bool = True, purposes: Sequence[str] = ()) -> str:
        """Every string of every recorded request body, concatenated (for leak checks)."""
        chosen = [r for r in self.requests if not purposes or r.purpose in purposes]
        return "\n".join(r.text(include_dsh_extensions) for r in chosen)

    def wait_for(self, condition: Callable[[ScriptedUpstream], bool], timeout: float = 10) -> bool:
        """Poll ``condition(self)`` until true or ``timeout`` seconds pass; returns the result."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition(self):
                return True
            time.sleep(0.01)
        return condition(self)

    # ----- lifecycle

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("scripted upstream is not running")
        return self._port

    @property
    def base_url(self) -> str:
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def start(self) -> ScriptedUpstream:
        if self._thread is not None:
            raise RuntimeError("scripted upstream already started")
        _install_quiet_cuts()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app(),
            log_config=None,
            log_level=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=self._graceful,
            backlog=4096,
            ssl_certfile=self._tls[0] if self._tls else None,
            ssl_keyfile=self._tls[1] if self._tls else None,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name=f"scripted-upstream-{self._port}",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                sock.close()
                raise RuntimeError("scripted upstream failed to start")
            time.sleep(0.005)
        self._socket = sock
        return self

    def stop(self) -> None:
        if self._thread is None or self._server is None:
            return
        self._stopping.set()
        self._server.should_exit = True
        self._thread.join(timeout=self._graceful + 10)
        alive = self._thread.is_alive()
        self._socket.close()
        self._thread = None
        if alive:
            raise RuntimeError("scripted upstream thread did not stop")

    def __enter__(self) -> ScriptedUpstream:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ----- request handling

    def _app(self) -> Starlette:
        routes = [
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/models", self._models, methods=["GET"]),
            Route(
                "/{path:path}",
                self._handle,
                methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
            ),
        ]
        return Starlette(routes=routes)

    async def _models(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": "deepseek-flash", "object": "model", "owned_by": "scripted"}],
            }
        )

    async def _record(self, request: Request) -> RecordedRequest:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in request.headers.items()}
        protocol = _protocol_of(request.url.path)
        if request.method != "POST":
            protocol = "other"
        with self._lock:
            recorded = RecordedRequest(
                index=next(self._request_numbers),
                method=request.method,
                path=request.url.path,
                query=request.url.query,
                headers=headers,
                raw_body=raw,
                body=body,
                time=time.time(),
                protocol=protocol,
                purpose=_purpose_of(protocol, headers, body),
                stream=bool(isinstance(body, Mapping) and body.get("stream")),
                peer=f"{request.client.host}:{request.client.port}" if request.client else "",
            )
            self._requests.append(recorded)
        return recorded

    def _choose(self, request: RecordedRequest) -> tuple[ScriptedResponse, str]:
        with self._lock:
            for predicate, make, label in self._rules:
                if predicate(request):
                    return make(request), label
            for position, response in enumerate(self._queue):
                accepts = (
                    response.match(request)
                    if response.match is not None
                    else request.purpose != "title"
                )
                if accepts:
                    del self._queue[position]
                    return response, response.label or "script"
        return ScriptedResponse(text=self.default_text, label="default"), "default"

    async def _handle(self, request: Request) -> Response:
        recorded = await self._record(request)
        if recorded.protocol == "other":
            recorded.outcome = "not_found"
            recorded.finished_at = time.time()
            return JSONResponse(
                {"error": {"type": "not_found_error", "message": f"no route {request.url.path}"}},
                status_code=404,
            )
        if not isinstance(recorded.body, Mapping):
            recorded.outcome = "http_error"
            recorded.finished_at = time.time()
            error = "request body is not a JSON object"
            body = (
                anthropic_error_body(400, error)
                if recorded.protocol == "anthropic"
                else openai_error_body(400, error)
            )
            return JSONResponse(body, status_code=400)
        response, label = self._choose(recorded)
        recorded.answered_with = label
        return _ScriptedReply(self, recorded, response)


class _ScriptedReply(Response):
    """Sends one scripted response, honouring its faults, on the raw ASGI channel."""

    def __init__(
        self, upstream: ScriptedUpstream, recorded: RecordedRequest, response: ScriptedResponse
    ) -> None:
        self.upstream = upstream
        self.recorded = recorded
        self.response = response
        self.background = None

    def _headers(self, content_type: str) -> list[tuple[bytes, bytes]]:
        request_id = f"scripted-req-{self.recorded.index}"
        headers = [
            (b"content-type", content_type.encode()),
            (b"request-id", request_id.encode()),
            (b"x-request-id", request_id.encode()),
        ]
        if self.response.retry_after is not None:
            headers.append((b"retry-after", f"{self.response.retry_after:g}".encode()))
        return headers

    def _finish(self, outcome: str) -> None:
        self.recorded.outcome = outcome
        self.recorded.finished_at = time.time()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        disconnected = asyncio.Event()

        async def watch_disconnect() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    disconnected.set()
                    return

        watcher = asyncio.ensure_future(watch_disconnect())
        try:
            await self._reply(send, disconnected)
        finally:
            watcher.cancel()

    async def _pause(self, seconds: float, disconnected: asyncio.Event) -> bool:
        """Sleep, waking early on client disconnect or server stop; False if woken early."""
        deadline = time.monotonic() + seconds
        while True:
            if disconnected.is_set() or self.upstream._stopping.is_set():
                return False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            await asyncio.sleep(min(remaining, 0.05))

    def _model(self) -> str:
        model = self.recorded.body.get("model")
        return model if isinstance(model, str) and model else "deepseek-flash"

    async def _reply(self, send: Send, disconnected: asyncio.Event) -> None:
        response = self.response
        protocol = self.recorded.protocol
        if response.status != 200:
            body = response.error_body
            if body is None:
                body = (
                    anthropic_error_body(response.status)
                    if protocol == "anthropic"
                    else openai_error_body(response.status)
                )
            payload = body if isinstance(body, bytes) else _dumps(body).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status,
                    "headers": self._headers("application/json"),
                }
            )
            self._finish("http_error")
            await send({"type": "http.response.body", "body": payload})
            return
        if self.recorded.stream:
            await self._stream(send, disconnected)
        else:
            await self._whole(send, disconnected)

    async def _whole(self, send: Send, disconnected: asyncio.Event) -> None:
        response = self.response
        number = self.recorded.index
        if self.recorded.protocol == "anthropic":
            message = anthropic_message(response, self._model(), number)
        elif self.recorded.protocol == "responses":
            message = responses_object(response, self._model(), number)
        else:
            message = openai_completion(response, self._model(), number)
        payload = _dumps(message).encode() if response.raw_body is None else response.raw_body
        if response.stall_after is not None and not await self._pause(
            response.stall_seconds, disconnected
        ):
            self._finish("client_disconnected" if disconnected.is_set() else "stopped")
            raise _ConnectionCut("stall interrupted")
        headers = self._headers("application/json")
        headers.append((b"content-length", str(len(payload)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if response.cut_after is not None:
            half = payload[: len(payload) // 2]
            await send({"type": "http.response.body", "body": half, "more_body": True})
            self._finish("cut")
            raise _ConnectionCut("scripted cut")
        self._finish("completed")
        await send({"type": "http.response.body", "body": payload})

    async def _stream(self, send: Send, disconnected: asyncio.Event) -> None:
        response = self.response
        number = self.recorded.index
        if response.raw_frames is not None:
            frames = [_Frame(data, True) for data in response.raw_frames]
            error_frame = _Frame(b"", False)
        elif self.recorded.protocol == "anthropic":
            frames = anthropic_stream_frames(response, self._model(), number)
            error_frame = _sse(
                "error",
                response.error_event
                or {
                    "type": "error",
                    "error": {"type": "overloaded_error", "message": "Overloaded"},
                },
            )
        elif self.recorded.protocol == "responses":
            frames = responses_stream_frames(response, self._model(), number)
            error_frame = _sse(
                "error",
                response.error_event
                or {"type": "error", "code": "server_error", "message": "Overloaded"},
            )
        else:
            options = self.recorded.body.get("stream_options")
            include_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
            frames = openai_stream_frames(response, self._model(), number, include_usage)
            error_frame = _openai_line(
                response.error_event
                or {"error": {"message": "Overloaded", "type": "server_error", "code": None}}
            )
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [*self._headers("text/event-stream"), (b"cache-control", b"no-cache")],
            }
        )
        seen_delta = False
        for position, frame in enumerate(frames):
            if response.cut_after == position:
                self._finish("cut")
                raise _ConnectionCut("scripted cut")
            if response.inject_after == position:
                await send(
                    {"type": "http.response.body", "body": response.inject, "more_body": True}
                )
            if response.error_event_after == position:
                self.recorded.events_sent += 1
                self._finish("error_event")
                await send({"type": "http.response.body", "body": error_frame.data})
                return
            if response.stall_after == position and not await self._pause(
                response.stall_seconds, disconnected
            ):
                break
            if (
                frame.is_delta
                and seen_delta
                and response.delay > 0
                and not await self._pause(response.delay, disconnected)
            ):
                break
            if disconnected.is_set() or self.upstream._stopping.is_set():
                break
            self.recorded.event_times.append(time.monotonic())
            await send({"type": "http.response.body", "body": frame.data, "more_body": True})
            self.recorded.events_sent += 1
            seen_delta = seen_delta or frame.is_delta
        else:
            self._finish("completed")
            await send({"type": "http.response.body", "body": b""})
            return
        if disconnected.is_set():
            self._finish("client_disconnected")
            return
        self._finish("stopped")
        raise _ConnectionCut("server stopping")


def started_upstream(
    script: Sequence[ScriptedResponse] = (), **options: Any
) -> Iterator[ScriptedUpstream]:
    """Generator form for pytest fixtures: ``yield from started_upstream(...)``."""
    with ScriptedUpstream(script, **options) as upstream:
        yield upstream
