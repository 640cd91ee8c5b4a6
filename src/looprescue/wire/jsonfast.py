"""JSON for the hot path: orjson, with the standard library as fallback for the inputs orjson
refuses (lone surrogates, integers beyond 64 bits) so nothing valid is ever rejected."""

from __future__ import annotations

import json
from typing import Any

import orjson

# bound once: compiled code would look the attribute up on the module at every call
_orjson_loads = orjson.loads
_orjson_dumps = orjson.dumps
_OrjsonError = orjson.JSONDecodeError


def loads(data: str | bytes) -> Any:
    try:
        return _orjson_loads(data)
    except _OrjsonError:
        # raises ValueError with the standard message when invalid; NaN/Infinity stay invalid
        return json.loads(data, parse_constant=_no_constant)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON (no spaces, non-ASCII kept), key order preserved."""
    try:
        return _orjson_dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "surrogatepass"
        )


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
