"""One wire object per protocol: everything the proxy knows about how a protocol is spelled.

A :class:`Wire` is chosen once per client request (``registry.wire_for``) and holds:

* the stream decoder (SSE events -> engine events), the encoder (engine client items -> SSE
  bytes) and the collector (engine client items -> one complete response body), plus the
  decoding of a complete response into events;
* the message envelope and the error body;
* the request side (``rescue.continuation.RequestEditor``): how to add a user or an assistant
  message, the retry overrides and lighter reasoning to a request body, how to prune loops
  out of its history, and what a valid request body looks like.

Nothing outside a wire object branches on the protocol. This module is the base the codecs
build on, so it imports none of them; ``registry.py`` does.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Protocol

from ..config import LoopRescueConfig
from ..rescue.continuation import KeptWork
from ..rescue.events import (
    ClientItem,
    EmitError,
    EngineOutput,
    FinishReported,
    StopReason,
    UpstreamEvent,
)
from ..rescue.sanitize import HistoryCut, HistoryPruner
from .sse import SSEEvent


class Malformed(ValueError):
    """An upstream payload that does not have the protocol's shape (the message says where)."""


class Decoder(Protocol):
    def decode(self, sse: SSEEvent) -> list[UpstreamEvent]: ...


class Encoder(Protocol):
    def encode(self, item: ClientItem) -> bytes: ...


class Collector(Protocol):
    error: EmitError | None

    def add(self, item: EngineOutput) -> None:
        """Take the engine's next output; what is no client item (an action, a state) is
        not part of the body and is passed over."""

    def result(self) -> dict[str, Any]: ...


class Wire(ABC):
    """A protocol's wire format, for one client request."""

    name: str
    stream_media_type = "text/event-stream; charset=utf-8"
    # bytes every stream's end-of-message frame contains (a mirrored stream is parsed as soon
    # as a read may hold its end; text that happens to contain them only parses it early)
    end_marker: bytes
    # False: a reasoning block after text is taken as the start of the answer (clients such as
    # claude -p and Qwen Code print only the text after the last one), so a continuation's
    # reasoning is not sent once text was. True where each is an item of its own.
    reasoning_after_text = False

    def __init__(self, body: Mapping[str, Any] | None = None) -> None:  # noqa: B027
        """``body`` is the client's request body (some wire details depend on it)."""

    @abstractmethod
    def decoder(self) -> Decoder: ...

    @abstractmethod
    def encoder(self) -> Encoder: ...

    @abstractmethod
    def collector(self) -> Collector: ...

    @abstractmethod
    def whole_events(self, message: Any) -> list[UpstreamEvent]:
        """A complete (non-streaming) response as the events its stream would have produced;
        raises :class:`Malformed` when it does not have the protocol's shape."""

    @abstractmethod
    def error_body(self, error: EmitError) -> dict[str, Any]: ...

    @abstractmethod
    def request_problem(self, body: Mapping[str, Any]) -> str | None:
        """Why the proxy cannot act on this request body (None when it can)."""

    def rescues(self, body: Mapping[str, Any]) -> bool:
        """False for requests the protocol lets through without rescue."""
        return True

    def conversation_view(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """The request as a body with ``system`` and ``messages`` (roles, text contents), the
        shape the conversation's identity and language are read from; other fields kept."""
        return body

    def tool_history(self, body: Mapping[str, Any]) -> list[Any]:
        """The history's tool calls paired with their results (``guard/history.py``)."""
        return []

    # ----- request side (rescue.continuation.RequestEditor)

    @abstractmethod
    def with_user_text(self, body: Mapping[str, Any], text: str) -> dict[str, Any]: ...

    @abstractmethod
    def with_assistant_text(self, body: Mapping[str, Any], kept: KeptWork) -> dict[str, Any]: ...

    @abstractmethod
    def with_retry_overrides(
        self, body: Mapping[str, Any], config: LoopRescueConfig
    ) -> dict[str, Any]: ...

    @abstractmethod
    def with_lighter_reasoning(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The ``lighter`` rung of the recovery ladder (``rescue/ladder.py``): effort low, or
        thinking off, as the protocol spells it; never more reasoning than the body asked."""

    @abstractmethod
    def output_budget(self, body: Mapping[str, Any]) -> int | None: ...

    @abstractmethod
    def with_output_budget(self, body: Mapping[str, Any], tokens: int) -> dict[str, Any]: ...

    @abstractmethod
    def prune_history(
        self, body: Mapping[str, Any], pruner: HistoryPruner
    ) -> tuple[dict[str, Any] | None, list[HistoryCut]]:
        """Loops cut out of the request's earlier assistant messages (``wire/history.py``)."""


# --------------------------------------------------------------------------- shared pieces


def count(value: Any) -> int | None:
    """A token count, or None for anything that is not a plain non-negative integer."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


# OpenAI's reasoning efforts at or below the ``lighter`` rung's low: never raised to it.
LIGHT_EFFORTS = frozenset({"none", "minimal", "low"})


# Indices of blocks, choices and tool calls are below this (2 ** 20).
MAX_INDEX = 1 << 20


def index_of(data: Mapping[str, Any], key: str = "index") -> int:
    """A block / choice / tool-call index; anything but a small non-negative integer is
    malformed (``Infinity``, ``1.5``, ``"0"``, ``true``)."""
    value = data.get(key)
    if type(value) is not int or not 0 <= value < MAX_INDEX:  # bool is a subclass: excluded
        raise Malformed(f"{key} must be a small non-negative integer, got {_short(value)}")
    return value


def obj(data: Mapping[str, Any], key: str, required: bool = True) -> Mapping[str, Any]:
    """A nested object field (``{}`` when absent and not required)."""
    value = data.get(key)
    if type(value) is dict or isinstance(value, Mapping):  # decoded JSON: dict, asked first
        return value
    if value is None and not required:
        return {}
    raise Malformed(f"{key} must be an object, got {_short(value)}")


def string(data: Mapping[str, Any], key: str, required: bool = True) -> str:
    value = data.get(key)
    if isinstance(value, str):
        return value
    if value is None and not required:
        return ""
    raise Malformed(f"{key} must be a string, got {_short(value)}")


def items(data: Mapping[str, Any], key: str) -> list[Any]:
    """A list field (``[]`` when absent or null)."""
    value = data.get(key)
    if value is None:
        return []
    if isinstance(value, list):
        return value
    raise Malformed(f"{key} must be a list, got {_short(value)}")


def finish_from(words: Mapping[str, StopReason], raw: Any) -> FinishReported:
    """A protocol's stop word as a neutral stop reason (the word itself is kept)."""
    word = raw if isinstance(raw, str) else None
    return FinishReported(words.get(word or "", "other"), word)


def finish_word(words: Mapping[str, str], reason: str, raw: str | None, default: str) -> str:
    return raw or words.get(reason, default)


def _short(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def check_messages(body: Mapping[str, Any], content_types: tuple[type, ...]) -> str | None:
    """Field problems shared by both protocols (the proxy reads these fields)."""
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        return "model: must be a string"
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        return "stream: must be a boolean"
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "messages: must be a list of message objects"
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping):
            return f"messages[{position}]: must be an object"
        if not isinstance(message.get("role"), str):
            return f"messages[{position}].role: must be a string"
        content = message.get("content")
        if content is not None and not isinstance(content, content_types):
            return f"messages[{position}].content: must be a string or a list of blocks"
    return None
