"""Planning a clean: which assistant messages loop, and their rewritten lines. Pure apart from
reading the log (no writing here; ``edit.py`` applies a plan)."""

from __future__ import annotations

from dataclasses import dataclass, field

from looprescue.config import LoopRescueConfig
from looprescue.detect.asked import largest_count
from looprescue.dsh.edit import encode_event
from looprescue.dsh.findings import CHANNEL_OF_BLOCK
from looprescue.dsh.log import SessionLog
from looprescue.dsh.prune import BlockCut, Language, cut_assistant_message, stream_problems
from looprescue.pruning import first_hit

CONTEXT_CHARS = 40


@dataclass(frozen=True, slots=True)
class BlockChange:
    cut: BlockCut
    rule: str
    before: str  # a little text around the cut point, as it was
    after: str  # the end of the block as it will be

    def to_dict(self) -> dict:
        return {
            "block": self.cut.index,
            "channel": self.cut.channel,
            "rule": self.rule,
            "originalChars": self.cut.original_chars,
            "keptChars": self.cut.kept_chars,
            "removedChars": self.cut.removed_chars,
            "marker": self.cut.marker,
            "droppedBlock": self.cut.dropped,
            "before": self.before,
            "after": self.after,
        }


@dataclass(frozen=True, slots=True)
class MessageChange:
    seq: int
    turn: int | None
    step: int | None
    line: int
    blocks: tuple[BlockChange, ...]

    @property
    def removed_chars(self) -> int:
        return sum(b.cut.removed_chars for b in self.blocks)

    def to_dict(self) -> dict:
        return {
            "seq": self.seq,
            "turn": self.turn,
            "step": self.step,
            "line": self.line,
            "removedChars": self.removed_chars,
            "blocks": [b.to_dict() for b in self.blocks],
        }


@dataclass
class CleanPlan:
    log: SessionLog
    changes: list[MessageChange] = field(default_factory=list)
    replacements: dict[int, bytes] = field(default_factory=dict)
    # looping messages left as they are, and why (an edit that could not be checked)
    skipped: list[str] = field(default_factory=list)

    @property
    def removed_chars(self) -> int:
        return sum(c.removed_chars for c in self.changes)


def _flat(text: str) -> str:
    return text.replace("\n", "⏎")


def plan_clean(
    log: SessionLog,
    config: LoopRescueConfig | None = None,
    *,
    marker: bool = True,
    language: Language = "auto",
) -> CleanPlan:
    """Cut every looping reasoning/text block of every ``assistant/message`` back to where its
    loop started. Other lines are not touched (they are not in ``replacements``).

    A looping message whose edit could not be verified is left alone and listed in
    ``skipped``: one whose stream is unreadable, or whose stream would not replay to the new
    content. So what a dry run shows is exactly what a real clean writes."""
    config = config or LoopRescueConfig()
    plan = CleanPlan(log)
    request: list[str] = []  # what the human wrote so far: it bounds the answers' lists
    asked_up_to = 0  # the largest count it names (read once per message)
    for record in log.records():
        if record.type == "user/message" and record.view is not None:
            said = record.view.human_text()
            if said:
                request.append(said)
                asked_up_to = max(asked_up_to, largest_count(said))
        if record.type != "assistant/message" or record.line is None:
            continue
        event, view = record.event, record.view
        keep: dict[int, int] = {}
        rules: dict[int, str] = {}
        for index, block in enumerate(view.blocks):
            channel = CHANNEL_OF_BLOCK.get(block.type)
            if channel is None or block.text is None:
                continue
            hit = first_hit(block.text, channel, config, request, asked_up_to)
            if hit is not None:
                keep[index] = hit.prune_offset
                rules[index] = hit.rule
        if not keep:
            continue
        where = f"seq {event['seq']} (line {record.line.number})"
        if view.message is None:
            plan.skipped.append(f"{where}: legacy message shape; not edited")
            continue
        if view.stream is None and "stream" in event["data"]:
            plan.skipped.append(f"{where}: its data.stream is unreadable; not edited")
            continue
        new_event, cuts = cut_assistant_message(event, keep, marker=marker, language=language)
        if not cuts:
            continue
        problems = stream_problems(new_event)
        if problems:
            plan.skipped.append(f"{where}: the cut stream would not match: {problems[0]}")
            continue
        old_blocks = event["data"]["message"]["content"]
        new_texts = {
            c.index: new_event["data"]["message"]["content"][c.index - _dropped_before(cuts, c)]
            for c in cuts
            if not c.dropped
        }
        changes = []
        for cut in cuts:
            text = old_blocks[cut.index]["text"]
            start = max(0, cut.kept_chars - CONTEXT_CHARS)
            before = _flat(
                ("…" if start else "")
                + text[start : cut.kept_chars]
                + "⟦"
                + text[cut.kept_chars : cut.kept_chars + CONTEXT_CHARS]
                + "…"
            )
            after_text = new_texts[cut.index]["text"] if cut.index in new_texts else ""
            tail_start = max(0, len(after_text) - 2 * CONTEXT_CHARS)
            after = (
                _flat(("…" if tail_start else "") + after_text[tail_start:]) or "(block removed)"
            )
            changes.append(BlockChange(cut, rules[cut.index], before, after))
        plan.changes.append(
            MessageChange(event["seq"], view.turn, view.step, record.line.number, tuple(changes))
        )
        plan.replacements[record.line.number] = encode_event(new_event)
    return plan


def _dropped_before(cuts: list[BlockCut], cut: BlockCut) -> int:
    return sum(1 for c in cuts if c.dropped and c.index < cut.index)
