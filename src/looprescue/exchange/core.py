"""One rescued client request, sans-IO: upstream bytes in, client bytes and actions out.

:class:`Exchange` joins a protocol's wire object and the rescue engine. It decodes upstream
bytes (SSE, or a whole JSON body) into engine events, feeds them, and routes what the engine
returns in one place (:meth:`Exchange._route`): client items are encoded (or collected into one
body), everything else becomes a field of the returned :class:`Step` for the I/O side to carry
out: audit records, a conversation state to store, "close this upstream response", "send this
request".

The I/O side (``proxy/driver.py`` for the proxy and the SDK wrapper) only moves bytes: it sends
the requests a step names, feeds what comes back, writes ``Step.client`` to the client, and
reports transport failures with :meth:`Exchange.fail`.

In ``observe`` mode a streamed answer is *mirrored*: the client gets the upstream's own bytes,
whole frames at a time, as soon as they are read, and the engine only watches them. Nothing it
could encode would differ from them (observe changes nothing), so nothing is encoded, and the
upstream bytes are parsed in batches of :data:`WATCH_BATCH_BYTES` (or as soon as a read may
hold the end of the message) instead of read by read, their text deltas joined: the detector
decides the same for any chunking, and a loop is recorded at most one batch later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..rescue.engine import RescueEngine
from ..rescue.events import (
    AuditRecord,
    CloseUpstream,
    EmitError,
    EmitPing,
    ReasoningDelta,
    ResumeTimedOut,
    SaveConversation,
    SendRequest,
    TextDelta,
    UpstreamFailed,
)
from ..wire import jsonfast
from ..wire.base import Malformed, Wire
from ..wire.sse import SSEError, SSEParser

_ACTIONS = frozenset({AuditRecord, CloseUpstream, SendRequest, SaveConversation})

# A mirrored stream is parsed once this many of its bytes wait (some 35 Anthropic deltas of
# 6 chars): per read, only the frame ends are looked for; parsing, decoding and judging a batch
# at once costs a fraction of doing it read by read.
WATCH_BATCH_BYTES = 4096
# the headers of an upstream error that tell a client when (and whether) to retry
RETRY_HEADERS = frozenset({"retry-after", "retry-after-ms", "x-should-retry"})
# a read that ends one of these ends a frame (a blank line after LF, CRLF or CR lines)
_FRAME_ENDS = (b"\n\n", b"\n\r\n", b"\r\r")


@dataclass(slots=True, init=False)
class Step:
    """What to do after feeding the exchange, in this order: write ``client``, store ``save``,
    write ``audit``, send ``request`` when set. (Whether the response just read is closed or
    drained is the exchange's ``reading`` and ``hung_up``.)"""

    client: bytes
    request: SendRequest | None
    save: Any  # ConversationState snapshot
    audit: list[AuditRecord]

    def __init__(self) -> None:
        # one per upstream read: written out, not generated (see ``rescue/events.py``)
        self.client = b""
        self.request = None
        self.save = None
        self.audit = []


class Exchange:
    """The engine and the wire of one client request (streaming or not)."""

    def __init__(
        self, engine: RescueEngine, wire: Wire, streaming: bool, mirror: bool = False
    ) -> None:
        """``mirror``: a streamed answer goes to the client as the upstream sent it, the engine
        only watching it (for ``observe``, where the engine changes nothing)."""
        self.engine = engine
        self.wire = wire
        self.streaming = streaming
        self.mirror = mirror and streaming
        # observed, not streamed: the upstream's body, for the client as it came
        self._observed: bytes | None = None
        self._observing = mirror and not streaming
        self._unsent: list[bytes] = []  # mirrored: read, not yet passed to the client
        self._unparsed: list[bytes] = []  # mirrored: read, not yet parsed
        self._unparsed_bytes = 0
        self._end_marker = wire.end_marker
        self._encoder = wire.encoder() if streaming else None
        self._collector = None if streaming else wire.collector()
        self._parser = SSEParser()
        self._decoder = wire.decoder()
        self.attempt = -1  # the upstream request being fed (SendRequest.attempt)
        # the headers of a continuation's HTTP error a client's retry policy reads
        self.error_headers: dict[str, str] = {}
        self._accepting = False  # False once the engine said to stop reading this response
        self._hung_up = False  # the engine closed this response before its message ended

    @property
    def done(self) -> bool:
        return self.engine.done

    @property
    def reading(self) -> bool:
        """True while the current upstream response is still to be fed."""
        return self._accepting

    @property
    def hung_up(self) -> bool:
        """True when the engine closed the current upstream response before its message
        ended (a cut): it must not be read on, even to reuse its connection, since every
        token the model writes after the cut is paid for."""
        return self._hung_up

    # ------------------------------------------------------------------ upstream requests

    def start(self) -> Step:
        """The first upstream request (and any state change it implies)."""
        return self._route(self.engine.start())

    def response_started(self, attempt: int) -> None:
        """A response to request ``attempt`` is about to be fed."""
        self.attempt = attempt
        self._parser = SSEParser()
        self._decoder = self.wire.decoder()
        self._accepting = True
        self._hung_up = False
        self._unsent = []
        self._unparsed = []
        self._unparsed_bytes = 0

    def passes_through(self, status: int) -> bool:
        """True when an HTTP error answer goes to the client as it is: for the client's own
        request (its retry policy keys off status, headers and body), not for a continuation."""
        return status != 200 and self.attempt <= 0

    def http_error(
        self, status: int, payload: bytes, headers: Sequence[tuple[str, str]] = ()
    ) -> Step:
        """A continuation answered with an HTTP error status: the client gets it as an error
        (its message and type as the upstream gave them; a whole answer gets its status and
        its retry headers too)."""
        message, error_type = payload.decode("utf-8", "replace"), None
        try:
            error = jsonfast.loads(payload).get("error")
        except (ValueError, AttributeError):
            error = None
        if isinstance(error, dict):
            if isinstance(error.get("message"), str):
                message = error["message"]
            if isinstance(error.get("type"), str):
                error_type = error["type"]
        self.error_headers = {
            name.lower(): value for name, value in headers if name.lower() in RETRY_HEADERS
        }
        return self.fail(UpstreamFailed("http", message, status, error_type))

    # ------------------------------------------------------------------ feeding

    def feed_bytes(self, chunk: bytes, now_ms: float | None = None) -> Step:
        """Streamed upstream bytes (any split); ``now_ms``: the adapter's clock when they
        were read, which bounds how long the engine holds text back (``holdMaxMs``)."""
        if not self._accepting:
            return Step()
        if self.mirror:
            return self._mirror(chunk)
        step = Step()
        if now_ms is not None:
            self._route(self.engine.tick(now_ms), step)
        try:
            frames = self._parser.feed(chunk)
        except SSEError as err:
            return self.fail(UpstreamFailed("malformed", f"upstream stream: {err}"))
        if not frames:
            return step
        decode = self._decoder.decode
        if len(frames) == 1:
            events = decode(frames[0])
        else:
            events = [event for sse in frames for event in decode(sse)]
            events = _join_deltas(events, keep_parts=True)
        # the engine judges a read's run of deltas once, after its last one (called on the
        # engine itself, not a bound method kept aside: compiled, that is a direct call)
        engine = self.engine
        last = len(events) - 1
        for number, event in enumerate(events):
            self._route(engine.feed(event, more=number < last), step)
            if not self._accepting:
                break
        return step

    def mirrors_as_it_is(self, chunk: bytes) -> bool:
        """Mirror mode's usual read, taken without a step: one that ends a frame, with none
        begun before it, in a batch not yet due for parsing and with no end of message in it,
        is the client's as it is (True). False: anything else, for :meth:`feed_bytes`."""
        if (
            not self.mirror
            or not self._accepting
            or self._unsent
            or not chunk.endswith(_FRAME_ENDS)
            or self._unparsed_bytes + len(chunk) >= WATCH_BATCH_BYTES
            or self._end_marker in chunk
        ):
            return False
        self._unparsed.append(chunk)
        self._unparsed_bytes += len(chunk)
        return True

    def _mirror(self, chunk: bytes) -> Step:
        """Mirror mode: the read goes to the client once the bytes read end a frame; they are
        parsed and watched a batch at a time, and as soon as the end of the message may be
        in them."""
        self._unparsed.append(chunk)
        self._unparsed_bytes += len(chunk)
        unsent = self._unsent
        inside_frame = bool(unsent)  # the last read ended inside a frame
        unsent.append(chunk)
        step = Step()
        marker = self._end_marker
        if (
            self._unparsed_bytes >= WATCH_BATCH_BYTES
            or marker in chunk
            or (inside_frame and marker in b"".join(unsent))
        ):
            self._watch(step)
            if step.client:  # the stream failed: its error replaces the rest of it
                self._unsent = []
                return step
            self._pass_frames(step)
        elif chunk.endswith(_FRAME_ENDS):
            step.client = chunk if len(unsent) == 1 else b"".join(unsent)
            self._unsent = []
        return step

    def _pass_frames(self, step: Step) -> None:
        """The bytes read up to the end of their last whole frame to the client."""
        data = b"".join(self._unsent)
        end = _last_frame_end(data)
        if end:
            step.client += data[:end]
        self._unsent = [data[end:]] if end < len(data) else []

    def _watch(self, step: Step) -> None:
        """Parse the mirrored bytes read so far and feed their events (consecutive deltas of
        one block as one); ``step.client`` gets only an error of the engine's."""
        if not self._unparsed:
            return
        data = b"".join(self._unparsed)
        self._unparsed = []
        self._unparsed_bytes = 0
        try:
            frames = self._parser.feed(data)
        except SSEError as err:
            self._route(
                self.engine.feed(UpstreamFailed("malformed", f"upstream stream: {err}")), step
            )
            return
        # the engine only watches: a run's deltas go as one, with no parts to feed one by one
        events = _join_deltas(
            [event for sse in frames for event in self._decoder.decode(sse)], keep_parts=False
        )
        engine = self.engine
        for event in events:
            self._route(engine.feed(event), step)
            if isinstance(event, UpstreamFailed) and event.kind == "in_band":
                step.client = b""  # the upstream's own error frame went to the client
            if not self._accepting:
                return

    def upstream_ended(self) -> Step:
        """The current upstream response's body ended."""
        if not self._accepting:
            return Step()
        step = Step()
        if self.mirror:
            self._watch_to_failure(step)  # the end of the message may be in the last batch
            if not self._accepting:
                return step
        try:
            self._parser.close()
        except SSEError as err:
            failure = UpstreamFailed("malformed", f"upstream stream: {err}")
        else:
            message = "upstream stream ended before its end-of-message event"
            failure = UpstreamFailed("transport", message)
        return self._route(self.engine.feed(failure), step)

    def feed_whole(self, payload: bytes) -> Step:
        """A complete (non-streaming) upstream response body."""
        if self._observing:
            self._observed = payload
        try:
            events = self.wire.whole_events(jsonfast.loads(payload))
        except (Malformed, ValueError, KeyError, TypeError) as err:
            events = [UpstreamFailed("malformed", f"upstream response body: {err}")]
        step = Step()
        for event in events:
            self._route(self.engine.feed(event), step)
            if not self._accepting:
                break
        return step

    def fail(self, event: UpstreamFailed | ResumeTimedOut) -> Step:
        """The transport broke (connection, stall, timeout) or the request failed."""
        step = Step()
        if self.mirror:
            self._watch_to_failure(step)  # the text read before the failure is judged too
            if not self._accepting:
                return step
        return self._route(self.engine.feed(event), step)

    def _watch_to_failure(self, step: Step) -> None:
        """Mirror mode, the response failing: what was read is watched, its whole frames go
        to the client, a frame left incomplete never does."""
        self._watch(step)
        if not step.client:
            self._pass_frames(step)
        self._unsent = []

    # ------------------------------------------------------------------ the client side

    def ping(self) -> bytes:
        """Bytes that keep a streaming client connection alive while the upstream is quiet."""
        assert self._encoder is not None
        return self._encoder.encode(EmitPing())

    def whole_response(self) -> tuple[int, bytes]:
        """Status and JSON body of a non-streaming answer (call once the engine is done)."""
        assert self._collector is not None
        if self._observed is not None:
            return 200, self._observed  # observe changes nothing: the upstream's own bytes
        error = self._collector.error
        if error is None:
            try:
                return 200, jsonfast.dumps(self._collector.result())
            except Malformed as err:
                error = EmitError("malformed", f"upstream response body: {err}")
        status = error.status if error.kind == "http" and error.status else 502
        return status, jsonfast.dumps(self.wire.error_body(error))

    def gateway_error(self, message: str) -> bytes:
        """The protocol's error body for an upstream that could not be reached."""
        return jsonfast.dumps(self.wire.error_body(EmitError("transport", message)))

    # ------------------------------------------------------------------ routing

    def _route(self, outputs: list[Any], step: Step | None = None) -> Step:
        """The one place engine output is sorted: client items to the encoder (or collector),
        everything else into the step."""
        if step is None:
            step = Step()
        pieces = []
        for item in outputs:
            kind = type(item)
            if kind not in _ACTIONS:
                if self._encoder is not None:
                    if not self.mirror or kind is EmitError:  # mirrored: the upstream's bytes
                        pieces.append(self._encoder.encode(item))
                else:
                    self._collector.add(item)  # type: ignore[union-attr]
            elif kind is AuditRecord:
                step.audit.append(item)
            elif kind is SaveConversation:
                step.save = item.state
            elif kind is CloseUpstream:
                self._accepting = False
                self._hung_up = True
            else:
                step.request = item
                self._accepting = False
        if pieces:
            step.client += pieces[0] if len(pieces) == 1 else b"".join(pieces)
        if self.engine.done:
            self._accepting = False
        return step


def _last_frame_end(data: bytes) -> int:
    """Where the last whole SSE frame in ``data`` ends (0: none does)."""
    end = 0
    for blank_line in _FRAME_ENDS:
        found = data.rfind(blank_line)
        if found >= 0:
            end = max(end, found + len(blank_line))
    return end


def _joined(
    first: ReasoningDelta | TextDelta, texts: list[str], keep_parts: bool
) -> ReasoningDelta | TextDelta:
    if len(texts) == 1:
        return first
    return type(first)(first.index, "".join(texts), tuple(texts) if keep_parts else None)


def _join_deltas(events: list[Any], keep_parts: bool) -> list[Any]:
    """``events`` with each run of consecutive deltas of one block joined into one delta;
    ``keep_parts``: it keeps the deltas it joins (``TextDelta.parts``).

    The deltas of one network read reach the client in one write anyway: the engine books,
    queues and releases the run once instead of once per delta, and with the parts still
    feeds the detector delta by delta, stopping where it fires, so it decides and counts as it
    did for each. An empty delta is left alone (the engine counts none)."""
    out: list[Any] = []
    first: ReasoningDelta | TextDelta | None = None
    run: list[str] = []
    for event in events:
        kind = type(event)
        if (kind is TextDelta or kind is ReasoningDelta) and event.text:
            if first is not None and kind is type(first) and event.index == first.index:
                run.append(event.text)
                continue
            if first is not None:
                out.append(_joined(first, run, keep_parts))
            first, run = event, [event.text]
            continue
        if first is not None:
            out.append(_joined(first, run, keep_parts))
            first, run = None, []
        out.append(event)
    if first is not None:
        out.append(_joined(first, run, keep_parts))
    return out
