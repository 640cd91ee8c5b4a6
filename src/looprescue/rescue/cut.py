"""The cut plan: what a confirmed loop costs the stream, and what happens next.

Pure decisions, kept apart from the state machine so each can be read (and tested) alone:

* :func:`cut_point`: how much of the channel the client keeps, and the honest accounting of
  loop text that reached it (``kept_loop_chars``: the one copy a periodic loop may keep;
  ``leaked_loop_chars``: anything past the prune point, the target being zero);
* :func:`cut_action`: observe, defer, cut, stop at the cap or at the end of the client's
  output budget, or resume;
* :func:`plan_cut`: both for one hit, with the text that is dropped, the copy of the loop that
  is kept, how the response finishes and the note that tells the user why.

The engine carries a :class:`CutPlan` out (drops the held loop text, closes the upstream,
finishes or resumes); nothing here looks at the stream's state beyond what it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..detect.hits import Hit
from . import marker as notes
from .events import Channel, StopReason
from .marker import Lang

# rules after whose cut in the answer the response finishes instead of resuming: the answer
# is whole (overrun) or counts on past any count asked (counted), or the continuation copies
# its correction (parrot) or the answer shown before it (restate), which a new one, sent the
# same, would repeat. Cut in the reasoning, the answer is still to come: it resumes.
FINISHING_RULES = frozenset({"overrun", "counted", "parrot", "restate"})


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


@dataclass(frozen=True, slots=True)
class CutPlan:
    """What one confirmed loop does to the response."""

    hit: Hit
    point: CutPoint
    released: int  # chars of the channel the client had when the loop was confirmed
    loop_text: str  # the channel's text from ``point.keep_to`` on: dropped
    # the loop's copy the client keeps (``rules.restate`` of a continuation); "" for reasoning
    loop_copy: str
    onset: int  # where the loop begins, within what the client keeps
    action: CutAction
    reason: StopReason  # the finish after the cut, when the response finishes
    note: str  # visible text the finish comes after ("": none)

    @property
    def channel(self) -> Channel:
        return self.hit.channel

    def record(self, attempt: int, held_chars: int) -> dict[str, Any]:
        """The detection's audit record (the loop text in full: kept there and nowhere else)."""
        point = self.point
        return {
            **self.hit.to_dict(),
            "attempt": attempt,
            "kept_chars": point.keep_to,
            "chars_pruned": len(self.loop_text),
            "held_chars": held_chars,
            "released_chars": self.released,
            "kept_loop_chars": point.kept_loop_chars,
            "leaked_chars": point.leaked_loop_chars,
            "leaked_loop_chars": point.leaked_loop_chars,
            "loop_text": self.loop_text,
        }


def plan_cut(
    hit: Hit,
    *,
    text: str,
    fed: int,
    released: int,
    mode: str,
    tool_call_open: bool,
    tool_calls_sent: int,
    rescues_in_a_row: int,
    max_rescues: int,
    budget: int | None,
    tokens_left: int | None,
    min_resume_tokens: int,
    marker: bool,
    lang: Lang,
) -> CutPlan:
    """The plan for ``hit``, given its channel's ``text`` (``fed`` chars, ``released`` of them
    on the client) and the response's state (as ``cut_action`` takes it)."""
    point = cut_point(
        loop_start=hit.loop_start, prune_offset=hit.prune_offset, released=released, fed=fed
    )
    loop_text = text[point.keep_to : fed]
    onset = min(hit.loop_start, point.keep_to)
    channel = hit.channel
    action = cut_action(
        mode=mode,
        tool_call_open=tool_call_open,
        tool_calls_sent=tool_calls_sent,
        rescues_in_a_row=rescues_in_a_row,
        max_rescues=max_rescues,
        tokens_left=tokens_left,
        min_resume_tokens=min_resume_tokens,
        finishes=channel == "text" and hit.rule in FINISHING_RULES,
    )
    reason: StopReason = "stop"
    note = ""
    if action is CutAction.TOOL_CALLS_DONE:
        reason = "tool_calls"
    elif action is CutAction.CUT:
        # the response ends with visible text saying what happened: the text's own marker,
        # else a note (a reasoning loop may leave no text at all)
        if not (channel == "text" and marker and loop_text):
            note = notes.cut_note(channel, lang)
    elif action is CutAction.CAP:
        note = notes.cap_note(rescues_in_a_row, lang)
    elif action is CutAction.BUDGET:
        reason = "max_tokens"
        note = notes.budget_note(budget or 0, lang)
    return CutPlan(
        hit=hit,
        point=point,
        released=released,
        loop_text=loop_text,
        loop_copy="" if channel == "reasoning" else text[onset : point.keep_to],
        onset=onset,
        action=action,
        reason=reason,
        note=note,
    )
