"""How times and sizes are shown to people, the same in every command and the report."""

from __future__ import annotations

import time


def format_time(epoch_ms: float | None) -> str:
    """Local time of an epoch in milliseconds, to the minute; ``-`` when unknown."""
    if epoch_ms is None or isinstance(epoch_ms, bool) or not isinstance(epoch_ms, int | float):
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch_ms / 1000))


def format_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"
