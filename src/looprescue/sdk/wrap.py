"""``looprescue.wrap(client)``: the rescue, inside a Python program, with no proxy.

The wrapped client is a copy of the SDK client (``client.with_options(http_client=…)``) whose
HTTP client hands rescued routes to the engine (``transport.py``) and everything else to the
original client's own transport, so its connection pool, proxies, TLS settings and timeouts
stay in force. The original client is left as it was.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from ..config import ConfigError, LoopRescueConfig, config_from_mapping, load_config
from ..proxy.service import RescueService
from ..proxy.state import StateStore
from .transport import async_transport_class, sync_transport_class

C = TypeVar("C")
_CLASSES: dict[tuple[str, bool], type] = {}


def wrap(
    client: C,
    config: LoopRescueConfig | Mapping[str, Any] | str | Path | None = None,
    *,
    store: StateStore | None = None,
    registry: Any = None,
) -> C:
    """A copy of ``client`` (``openai.OpenAI`` / ``AsyncOpenAI``, ``anthropic.Anthropic`` /
    ``AsyncAnthropic``) whose chat completions and messages are rescued by the engine.

    ``config``: a :class:`LoopRescueConfig`, a mapping of its keys, or a YAML file (None: the
    defaults); a wrong key fails with :class:`ConfigError` naming it. ``store``: where
    conversation state lives (default: in this process, per wrapped client). ``registry``: the
    prometheus-client registry the counters go to (default: the process's default registry).
    """
    http = getattr(client, "_client", None)
    lib = _library_of(http)
    if lib is None or not callable(getattr(client, "with_options", None)):
        raise TypeError(
            "wrap() takes an openai.OpenAI / AsyncOpenAI or anthropic.Anthropic / "
            f"AsyncAnthropic client, got {type(client).__name__}"
        )
    if _is_rescuing(http):
        return client  # already wrapped
    service = RescueService(_config(config), store, metrics_registry=registry)
    asynchronous = isinstance(http, lib.AsyncClient)
    transport = _transport_class(lib, asynchronous)(service, http)
    client_class = lib.AsyncClient if asynchronous else lib.Client
    rescuing = client_class(
        transport=transport,
        timeout=http.timeout,
        follow_redirects=http.follow_redirects,
        event_hooks=http.event_hooks,
        trust_env=False,  # proxies from the environment are the original transport's business
    )
    return client.with_options(http_client=rescuing)  # type: ignore[attr-defined,no-any-return]


def _config(config: LoopRescueConfig | Mapping[str, Any] | str | Path | None) -> LoopRescueConfig:
    if config is None or isinstance(config, LoopRescueConfig):
        return config or LoopRescueConfig()
    if isinstance(config, Mapping):
        return config_from_mapping(dict(config), "wrap(config=…)")
    if isinstance(config, str | Path):
        return load_config(config)
    raise ConfigError(f"wrap(config=…): expected a config, a mapping or a path, got {config!r}")


def _library_of(http: Any) -> ModuleType | None:
    """``httpx`` or ``httpx2``: the HTTP library of the SDK's client."""
    for cls in type(http).__mro__:  # the SDKs subclass the library's client
        lib = sys.modules.get(cls.__module__.split(".")[0])
        clients = tuple(getattr(lib, name, None) for name in ("Client", "AsyncClient"))
        if (
            lib is not None
            and hasattr(lib, "AsyncBaseTransport")
            and all(isinstance(c, type) for c in clients)
            and isinstance(http, clients)
        ):
            return lib
    return None


def _transport_class(lib: ModuleType, asynchronous: bool) -> type:
    key = (lib.__name__, asynchronous)
    if key not in _CLASSES:
        make = async_transport_class if asynchronous else sync_transport_class
        _CLASSES[key] = make(lib)
    return _CLASSES[key]


def _is_rescuing(http: Any) -> bool:
    return any(isinstance(getattr(http, "_transport", None), cls) for cls in _CLASSES.values())
