"""The recovery ladder: what each continuation of one response changes.

A continuation that loops again says the model is stuck in how it answers, not unlucky in one
draw; another draw of the same sampling tends to loop the same way. So each later resume of
the same response climbs one rung of ``config.retryLadder``:

* ``sampling``: the retry settings alone (``retryTemperature`` and the others);
* ``lighter``: the retry settings, and lighter reasoning (the wire's
  ``with_lighter_reasoning``: effort low, or thinking off where the request only has an on/off
  switch);
* ``model``: the retry settings on ``retryModel``, the reasoning as the client asked (a
  stronger model is not told to think less).

Past the last rung each further resume stays on it; ``maxConsecutiveRescues`` still ends the
response first. The retry settings themselves are applied by the engine (they also
cover the client's next requests, ``retryRequests``); a rung is for one response only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import LoopRescueConfig, Rung
from .continuation import RequestEditor

# How a response's resumes ended, as the audit log and the metrics name it.
FINISHED = "finished"  # the last continuation ended on its own
CUT = "cut"  # it was cut too (the rescue cap, the output budget, a rule that finishes)
FAILED = "failed"  # it failed upstream


def rung_for(config: LoopRescueConfig, resumes: int) -> Rung:
    """The rung of a response's ``resumes``-th continuation (1: its first)."""
    ladder = config.retryLadder
    return ladder[min(max(resumes, 1), len(ladder)) - 1]


def with_rung(
    editor: RequestEditor, body: Mapping[str, Any], rung: Rung, config: LoopRescueConfig
) -> dict[str, Any]:
    """The continuation ``body`` with ``rung``'s own change (a new body; ``body`` is kept)."""
    if rung == "lighter":
        return editor.with_lighter_reasoning(body)
    if rung == "model" and config.retryModel is not None:
        # every protocol the proxy speaks names the model in the body's top-level "model"
        return {**body, "model": config.retryModel}
    return dict(body)
