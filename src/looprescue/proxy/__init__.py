"""The proxy's I/O: the HTTP server, the app, the upstream client and what drives an exchange.

``server.py`` (the HTTP/1.1 server) runs the Starlette app of ``app.py``, which answers each
request through ``reply.py`` by relaying it or by opening an exchange with ``service.py``;
``driver.py`` carries out the exchange's steps over a transport (``http1.py`` here), the state
store (``state.py``) and the audit log (``audit.py``). ``endpoints.py`` serves the metrics and
health routes.

The SDK wrapper and the LiteLLM callback use :class:`RescueService` from here without a web
server, so the names that need the ``[proxy]`` extra (Starlette, httptools) load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from .audit import AuditLog
from .driver import ExchangeDriver
from .service import Answer, Prepared, Rejected, Rescue, RescueService
from .state import LocalStates, RedisStates, StateStore, open_store

# name -> the module that defines it, imported when the name is first asked for
_NEED_PROXY_EXTRA = {
    "create_app": "app",
    "HttpServer": "server",
    "Limits": "server",
    "Http1Transport": "http1",
}

__all__ = [
    "Answer",
    "AuditLog",
    "ExchangeDriver",
    "Http1Transport",
    "HttpServer",
    "Limits",
    "LocalStates",
    "Prepared",
    "RedisStates",
    "Rejected",
    "Rescue",
    "RescueService",
    "StateStore",
    "create_app",
    "open_store",
]


def __getattr__(name: str) -> Any:
    module = _NEED_PROXY_EXTRA.get(name)
    if module is None:
        raise AttributeError(f"module 'looprescue.proxy' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
