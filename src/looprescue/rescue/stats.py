"""What happened in one client response, counted as it happens.

Every part of the engine adds to the same :class:`RescueStats`: the attempt's stream (released
and held chars), the cut plan (detections, cuts, pruned and leaked chars), the continuation
(resumes, the ladder's rung). It lives apart so each of those modules can count without
importing the engine, and so the adapters' totals (``metrics.py``) read one plain record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .sanitize import HistoryCut


@dataclass
class RescueStats:
    """What happened in one client response (the adapter can aggregate these)."""

    upstream_attempts: int = 1
    detections: int = 0
    rescues: int = 0
    cuts: int = 0
    deferred_prunes: int = 0
    cap_stops: int = 0
    resume_failures: int = 0
    pruned_chars: int = 0
    # Counted from the loop's onset when the loop is confirmed: chars of the one copy a periodic
    # loop may keep that had reached the client, and chars past the prune point that had (the
    # design target is zero).
    kept_loop_chars: int = 0
    leaked_loop_chars: int = 0
    released_chars: int = 0
    marker_chars: int = 0
    max_held_chars: int = 0
    # each hit's audit record without its loop text (JSON values, as ``Hit.to_dict`` gives)
    hits: list[dict[str, Any]] = field(default_factory=list)
    # loops cut out of the request's history before it went upstream (``sanitize.py``)
    history_removed_chars: int = 0
    history_cuts: list[HistoryCut] = field(default_factory=list)
    # each upstream failure the engine saw: the HTTP status, else the failure's kind
    upstream_errors: list[str] = field(default_factory=list)
    # the recovery ladder's rung of the last continuation, and how the response ended on it
    rung: str = ""
    rung_outcome: str = ""
