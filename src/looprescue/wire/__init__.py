"""How each protocol is spelled on the wire: its codecs and the SSE and JSON they share.

One module per protocol (``anthropic.py``: Anthropic Messages, ``openai.py``: OpenAI Chat
Completions, ``responses.py``: OpenAI Responses), each a :class:`Wire` subclass with its
decoder, encoder and collector. ``base.py`` is what they build on and imports none of them;
``registry.py`` imports them all and picks one per request. Pure: no I/O, no engine.
"""

from . import jsonfast
from .anthropic import AnthropicWire
from .base import Collector, Decoder, Encoder, Malformed, Wire
from .openai import OpenAIWire
from .registry import WIRES, wire_for
from .responses import ResponsesWire
from .sse import SSEError, SSEEvent, SSEParser, format_event

__all__ = [
    "WIRES",
    "AnthropicWire",
    "Collector",
    "Decoder",
    "Encoder",
    "Malformed",
    "OpenAIWire",
    "ResponsesWire",
    "SSEError",
    "SSEEvent",
    "SSEParser",
    "Wire",
    "format_event",
    "jsonfast",
    "wire_for",
]
