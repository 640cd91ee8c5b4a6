"""Value types the detector returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Final, Literal

Channel = Literal["reasoning", "text"]
CHANNELS: Final[tuple[Channel, ...]] = ("reasoning", "text")


@dataclass(frozen=True, slots=True)
class Hit:
    """A confirmed loop in one channel.

    Offsets count code points of that channel's text since the stream began.
    ``prune_offset`` is how many chars to keep: everything from there on is loop text.
    ``loop_start``..``fired_at`` is the loop span as seen when the rule fired (the first copy,
    which is kept, starts at ``loop_start``).
    ``lead_in`` is how far ``prune_offset`` lies before the cut the rule itself found: near-copies
    of the loop that led into it (``detect.nearcopy``). They are loop text and are pruned, but
    no watermark could hold them back without holding all text, so a stream may have released
    them; the watermark's promise is about the rule's own cut, ``prune_offset + lead_in``.
    """

    rule: str
    channel: Channel
    prune_offset: int
    loop_start: int
    fired_at: int
    repeats: float
    period: int | None
    evidence: str
    lead_in: int = 0

    @property
    def loop_chars(self) -> int:
        """Chars of loop text that pruning at ``prune_offset`` removes (as of the fire)."""
        return self.fired_at - self.prune_offset

    def to_dict(self) -> dict:
        data = asdict(self)
        data["loop_chars"] = self.loop_chars
        return data
