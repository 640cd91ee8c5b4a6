"""Value types exchanged between a protocol adapter and the rescue engine.

Inbound events describe what the upstream model stream did, in protocol-neutral terms; the
adapter of each protocol parses its wire format into them. Outbound items tell the adapter what
to send to the client and what to do upstream. Block indices on inbound events are the
upstream's; on outbound items they are the client's (the engine renumbers them so a resumed
response keeps one consistent sequence).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

Channel = Literal["reasoning", "text"]
# "opaque": a block the engine does not model (a server tool's call or result, redacted
# thinking, a kind added later): passed on as it came, never held, judged or cut into
BlockKind = Literal["reasoning", "text", "tool_call", "opaque"]
# Neutral stop reasons; ``raw`` fields keep the protocol's own word for a faithful pass-through.
StopReason = Literal["stop", "tool_calls", "max_tokens", "other"]
FailureKind = Literal["transport", "stall", "in_band", "malformed", "http"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts; None means the upstream did not report that field.

    ``input_tokens`` excludes cache reads (the Anthropic convention); the OpenAI adapter converts.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    # the protocol's other usage fields, as it spelled them (details, server tool counts):
    # passed on, and summed over attempts
    extra: Mapping[str, Any] = field(default_factory=dict)

    def merged(self, later: Usage) -> Usage:
        """Fields reported by ``later`` win; the others keep this value."""
        return Usage(
            input_tokens=_pick(later.input_tokens, self.input_tokens),
            output_tokens=_pick(later.output_tokens, self.output_tokens),
            cache_read_tokens=_pick(later.cache_read_tokens, self.cache_read_tokens),
            cache_write_tokens=_pick(later.cache_write_tokens, self.cache_write_tokens),
            extra={**self.extra, **later.extra} if later.extra else self.extra,
        )

    def added(self, other: Usage) -> Usage:
        """Both attempts' counts together (what one response cost over several requests)."""
        return Usage(
            input_tokens=_add(self.input_tokens, other.input_tokens),
            output_tokens=_add(self.output_tokens, other.output_tokens),
            cache_read_tokens=_add(self.cache_read_tokens, other.cache_read_tokens),
            cache_write_tokens=_add(self.cache_write_tokens, other.cache_write_tokens),
            extra=added_fields(self.extra, other.extra),
        )

    def with_output(self, tokens: int) -> Usage:
        return replace(self, output_tokens=tokens)


def _pick(first: int | None, second: int | None) -> int | None:
    return second if first is None else first


def _add(first: int | None, second: int | None) -> int | None:
    if first is None:
        return second
    return first if second is None else first + second


def added_fields(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """Two usage objects' other fields together: counts are summed, nested objects summed
    field by field, anything else (a tier's name) is the later one's."""
    out = dict(first)
    for key, value in second.items():
        mine = out.get(key)
        if _is_count(mine) and _is_count(value):
            out[key] = mine + value
        elif isinstance(mine, Mapping) and isinstance(value, Mapping):
            out[key] = added_fields(mine, value)
        else:
            out[key] = value
    return out


def _is_count(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# The value types made once per streamed delta (the deltas in, the client's text out) write
# their ``__init__`` out: a dataclass's generated one is interpreted code that mypyc does not
# compile, about 300 ns a value where the written one takes 25. ``Final`` fields keep them
# read-only where compiled, as ``frozen`` keeps the others.

# --------------------------------------------------------------------------- inbound


@dataclass(frozen=True, slots=True)
class MessageStarted:
    """The upstream response began. ``meta`` is protocol-specific and opaque to the engine."""

    message_id: str
    model: str
    usage: Usage = Usage()
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BlockStarted:
    index: int
    kind: BlockKind
    tool_id: str | None = None
    tool_name: str | None = None
    # the block's fields the engine does not model, as the protocol spelled them (an opaque
    # block: all of it), passed on with its start
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True, init=False, unsafe_hash=True)
class ReasoningDelta:
    index: Final[int]
    text: Final[str]
    parts: Final[tuple[str, ...] | None]  # as ``TextDelta.parts``

    def __init__(self, index: int, text: str, parts: tuple[str, ...] | None = None) -> None:
        self.index = index
        self.text = text
        self.parts = parts


@dataclass(slots=True, init=False, unsafe_hash=True)
class TextDelta:
    index: Final[int]
    text: Final[str]
    # None: one upstream delta. Else the upstream deltas ``text`` joins (a proxy hands the
    # deltas of one network read on together): the engine feeds the detector one at a time,
    # takes no delta after the one that made it fire, and counts each (see ``Attempt.tokens``)
    parts: Final[tuple[str, ...] | None]

    def __init__(self, index: int, text: str, parts: tuple[str, ...] | None = None) -> None:
        self.index = index
        self.text = text
        self.parts = parts


@dataclass(slots=True, init=False, unsafe_hash=True)
class ToolArgsDelta:
    index: Final[int]
    fragment: Final[str]

    def __init__(self, index: int, fragment: str) -> None:
        self.index = index
        self.fragment = fragment


@dataclass(slots=True, init=False, unsafe_hash=True)
class SignatureDelta:
    index: Final[int]
    signature: Final[str]

    def __init__(self, index: int, signature: str) -> None:
        self.index = index
        self.signature = signature


@dataclass(frozen=True, slots=True)
class Opaque:
    """Something the engine does not model (a delta of a kind it does not know, a field, a
    choice or an event it does not act on): it reaches the client unchanged, in its place.
    ``index`` is the upstream block it belongs to (None: the message); ``payload`` is the
    protocol's own value, which only the wire reads."""

    index: int | None
    payload: Any


@dataclass(frozen=True, slots=True)
class BlockStopped:
    index: int


@dataclass(frozen=True, slots=True)
class UsageReported:
    usage: Usage


@dataclass(frozen=True, slots=True)
class FinishReported:
    reason: StopReason
    raw: str | None = None
    # the end-of-message frame's fields the engine does not model (the wire's own shape)
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MessageEnded:
    """The upstream stream ended properly (Anthropic ``message_stop``, OpenAI ``[DONE]``)."""


@dataclass(frozen=True, slots=True)
class Ping:
    pass


@dataclass(frozen=True, slots=True)
class UpstreamFailed:
    """The upstream broke: connection cut, stalled, sent an in-band error or garbage, or (for a
    continuation request) answered with an HTTP error status."""

    kind: FailureKind
    message: str
    status: int | None = None
    error_type: str | None = None


@dataclass(frozen=True, slots=True)
class ResumeTimedOut:
    """The continuation request produced no first byte within ``resumeTimeoutMs``."""

    waited_ms: int


UpstreamEvent = (
    MessageStarted
    | BlockStarted
    | ReasoningDelta
    | TextDelta
    | ToolArgsDelta
    | SignatureDelta
    | Opaque
    | BlockStopped
    | UsageReported
    | FinishReported
    | MessageEnded
    | Ping
    | UpstreamFailed
    | ResumeTimedOut
)


# --------------------------------------------------------------------------- outbound


@dataclass(frozen=True, slots=True)
class EmitMessageStart:
    message_id: str
    model: str
    usage: Usage
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EmitBlockStart:
    index: int
    kind: BlockKind
    tool_id: str | None = None
    tool_name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # as ``BlockStarted.extra``


@dataclass(slots=True, init=False, unsafe_hash=True)
class EmitDelta:
    """Content for client block ``index``: reasoning/text characters or tool-argument JSON."""

    index: Final[int]
    kind: Final[BlockKind]
    text: Final[str]

    def __init__(self, index: int, kind: BlockKind, text: str) -> None:
        self.index = index
        self.kind = kind
        self.text = text


@dataclass(frozen=True, slots=True)
class EmitMarker:
    """The one-line note that replaces removed loop text, sent as content of block ``index``
    (``kind`` is that block's kind; a note in a fresh block has kind "text")."""

    index: int
    kind: BlockKind
    text: str


@dataclass(frozen=True, slots=True)
class EmitSignature:
    index: int
    signature: str


@dataclass(frozen=True, slots=True)
class EmitOpaque:
    """An :class:`Opaque` upstream value for the client, in client block ``index`` (None: the
    message)."""

    index: int | None
    payload: Any


@dataclass(frozen=True, slots=True)
class EmitBlockStop:
    index: int


@dataclass(frozen=True, slots=True)
class EmitPing:
    pass


@dataclass(frozen=True, slots=True)
class EmitFinish:
    """The single, final end of the client response."""

    reason: StopReason
    raw_reason: str | None
    usage: Usage
    extra: Mapping[str, Any] = field(default_factory=dict)  # as ``FinishReported.extra``


@dataclass(frozen=True, slots=True)
class EmitError:
    """End the client response with the protocol's in-band error."""

    kind: FailureKind
    message: str
    error_type: str | None = None
    status: int | None = None


@dataclass(frozen=True, slots=True)
class CloseUpstream:
    reason: str


@dataclass(frozen=True, slots=True)
class SendRequest:
    """Send ``body`` upstream (same path and headers as the client's request) and feed its
    response into the engine. ``attempt`` counts upstream requests of this response from 0 (the
    client's own request); ``changed`` is False when ``body`` is the client's body untouched, so
    the adapter can forward the client's bytes as they came."""

    body: Mapping[str, Any]
    attempt: int
    changed: bool = True


@dataclass(frozen=True, slots=True)
class SaveConversation:
    """The conversation's state changed: store this snapshot (the adapter owns the store)."""

    state: Any  # ConversationState; typed loosely to keep this module free of imports


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """Something worth an audit-log line: kind is detection, cut, resume, deferred_prune,
    resume_failed. The adapter adds wall-clock timings."""

    kind: str
    data: Mapping[str, Any]


ClientItem = (
    EmitMessageStart
    | EmitBlockStart
    | EmitDelta
    | EmitMarker
    | EmitSignature
    | EmitOpaque
    | EmitBlockStop
    | EmitPing
    | EmitFinish
    | EmitError
)
EngineOutput = ClientItem | CloseUpstream | SendRequest | SaveConversation | AuditRecord
TERMINAL_ITEMS = (EmitFinish, EmitError)
