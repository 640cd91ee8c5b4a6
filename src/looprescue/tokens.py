"""Tokens from text when a log has no usage for it: the proxy's estimate, the same everywhere.

DSH logs carry usage per step (``data.usage`` of an assistant message); the share of a
message's output tokens a loop takes is then its share of the message's chars. A failed
attempt, a narration run or another log without usage gets the estimate the rescue engine
uses for what a cut stream generated (on the high side).
"""

from __future__ import annotations

from looprescue.rescue.budget import estimate_tokens

__all__ = ["estimate_tokens", "share_of"]


def share_of(tokens: int, part_chars: int, whole_chars: int) -> int:
    """The tokens of ``part_chars`` out of a message of ``whole_chars`` that cost ``tokens``."""
    if whole_chars <= 0:
        return 0
    return round(tokens * min(part_chars, whole_chars) / whole_chars)
