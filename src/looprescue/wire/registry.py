"""Which wire a request speaks: by its route (the proxy, the SDK wrapper) or by its name.

The codecs import the base (``base.py``) and this module imports the codecs, so no import
goes the other way. A request's wire is looked up here once, before its exchange opens; the
per-chunk path only ever sees the wire object it was given.
"""

from __future__ import annotations

from .anthropic import AnthropicWire
from .base import Wire
from .openai import OpenAIWire
from .responses import ResponsesWire

# every protocol's wire by the name its instances carry (``Wire.name``: audit lines and metrics
# label a request with it)
WIRES: dict[str, type[Wire]] = {
    "anthropic": AnthropicWire,
    "openai": OpenAIWire,
    "responses": ResponsesWire,
}


def wire_for(method: str, path: str) -> type[Wire] | None:
    """The wire of requests the engine handles on this route (None: relay unchanged); build it
    with the request's body (``wire(body)``)."""
    if method != "POST":
        return None
    trimmed = path.rstrip("/")
    if trimmed.endswith("/v1/messages") or trimmed == "/messages":
        return AnthropicWire
    if trimmed.endswith("/chat/completions"):
        return OpenAIWire
    if trimmed.endswith("/v1/responses") or trimmed == "/responses":
        return ResponsesWire
    return None
