"""looprescue: detect, cut and rescue repetition loops in LLM agent streams and sessions."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["wrap"]


def __getattr__(name: str) -> Any:
    # ``looprescue.wrap`` is imported on first use: the CLI does not need the SDK machinery
    if name == "wrap":
        from .sdk import wrap

        return wrap
    raise AttributeError(f"module 'looprescue' has no attribute {name!r}")
