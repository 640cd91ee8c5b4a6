"""The cut policy: what a confirmed loop costs the stream, and what happens next.

Two pure decisions, kept apart from the state machine so each can be read (and tested) alone:

* :func:`cut_point`: how much of the channel the client keeps, and the honest accounting of
  loop text that reached it (``kept_loop_chars``: the one copy a periodic loop may keep;
  ``leaked_loop_chars``: anything past the prune point, the target being zero);
* :func:`cut_action`: observe, defer, cut, stop at the cap or at the end of the client's
  output budget, or resume.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class CutAction(str, Enum):
    """What the engine does with a confirmed loop (values are the audit log's words)."""

    OBSERVE = "observe"  # record it, change nothing
    DEFER = "defer"  # a tool call is streaming: drop the rest of the block, finish normally
    FINISH = "finish"  # nothing to resume (the answer is whole, or copies its correction)
    TOOL_CALLS_DONE = "tool_calls_done"  # tool calls reached the client: finish with them
    CUT = "cut"  # mode cut: finish after the kept text
    CAP = "cap"  # too many resumes in a row: finish with a visible note
    BUDGET = "budget"  # the client's output budget is spent: finish as the budget would
    RESUME = "resume"  # send a continuation and stream it into the same response


def cut_action(
    *,
    mode: str,
    tool_call_open: bool,
    tool_calls_sent: int,
    rescues_in_a_row: int,
    max_rescues: int,
    tokens_left: int | None = None,
    min_resume_tokens: int = 0,
    finishes: bool = False,
) -> CutAction:
    """``finishes``: a continuation would not help: what the client keeps is the whole answer
    (a list counted on past the range the request asked for), or the model copies the
    correction it was sent (a new one would be sent the same words)."""
    if mode == "observe":
        return CutAction.OBSERVE
    if tool_call_open:
        # never cut an open tool call
        return CutAction.DEFER
    if tool_calls_sent:
        # a continuation would need the results of the tool calls the client already has
        return CutAction.TOOL_CALLS_DONE
    if mode == "cut":
        return CutAction.CUT
    if finishes:
        return CutAction.FINISH
    if rescues_in_a_row >= max_rescues:
        return CutAction.CAP
    if tokens_left is not None and tokens_left < min_resume_tokens:
        return CutAction.BUDGET
    return CutAction.RESUME


@dataclass(frozen=True, slots=True)
class CutPoint:
    keep_to: int  # channel chars the client keeps (never less than it already has)
    kept_loop_chars: int
    leaked_loop_chars: int


def cut_point(*, loop_start: int, prune_offset: int, released: int, fed: int) -> CutPoint:
    """Where a channel is cut, given the hit and what of the channel was already released."""
    keep_to = min(max(prune_offset, released), fed)
    return CutPoint(
        keep_to=keep_to,
        kept_loop_chars=max(0, min(released, prune_offset) - loop_start),
        leaked_loop_chars=max(0, released - prune_offset),
    )
