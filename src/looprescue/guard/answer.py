"""The answer of a stopped request, shaped by the request's own protocol: one assistant text
block that ends the turn, streamed or whole as the client asked. It is made of the engine's
client items and spelled by the wire's encoder or collector, like every rescued answer."""

from __future__ import annotations

import hashlib

from ..rescue.events import (
    ClientItem,
    EmitBlockStart,
    EmitBlockStop,
    EmitDelta,
    EmitFinish,
    EmitMessageStart,
    Usage,
)
from ..wire import jsonfast
from ..wire.base import Wire


def stop_items(model: str, text: str) -> list[ClientItem]:
    # the id is derived from the text: the same stop gives the same answer
    message_id = "msg_looprescue_" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
    usage = Usage(input_tokens=0, output_tokens=0)
    return [
        EmitMessageStart(message_id, model, usage),
        EmitBlockStart(0, "text"),
        EmitDelta(0, "text", text),
        EmitBlockStop(0),
        EmitFinish("stop", None, usage),
    ]


def stop_body(wire: Wire, streaming: bool, model: str, text: str) -> bytes:
    """The whole answer: the stream's bytes, or the JSON body."""
    items = stop_items(model, text)
    if streaming:
        encoder = wire.encoder()
        return b"".join(encoder.encode(item) for item in items)
    collector = wire.collector()
    for item in items:
        collector.add(item)
    return jsonfast.dumps(collector.result())
