"""One rescued stream, sans-IO: upstream bytes in, client bytes and steps out.

:class:`Exchange` (``core.py``) joins a request's wire and its rescue engine; each read it is
fed gives a :class:`Step` the I/O side carries out. ``feed.py`` hands a transport's reads to it
(once per network read, so compiled), and ``upstream.py`` is the :class:`Transport` interface
every adapter's upstream implements. Nothing here opens a socket or a file.
"""

from .core import Exchange, Step
from .feed import DirectFeed, feed_item
from .upstream import (
    HOP_BY_HOP,
    Transport,
    UpstreamError,
    UpstreamResponse,
    forward_headers,
    response_headers,
)

__all__ = [
    "HOP_BY_HOP",
    "DirectFeed",
    "Exchange",
    "Step",
    "Transport",
    "UpstreamError",
    "UpstreamResponse",
    "feed_item",
    "forward_headers",
    "response_headers",
]
