"""Tokens from text when a log has no usage for it: a rough count, the same everywhere.

DSH logs carry usage per step (``data.usage`` of an assistant message); the share of a
message's output tokens a loop takes is then its share of the message's chars. A failed
attempt, a narration run or another log without usage gets this estimate instead.
"""

from __future__ import annotations

import math
import re

# BPE tokenizers of current models give about 4 chars of English or code per token, and
# somewhat more than one token per 2 CJK chars; both are estimates, never billed figures.
LATIN_CHARS_PER_TOKEN = 4.0
WIDE_TOKENS_PER_CHAR = 0.6
_WIDE = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def estimate_tokens(text: str) -> int:
    """About how many tokens ``text`` is."""
    if not text:
        return 0
    if text.isascii():
        return math.ceil(len(text) / LATIN_CHARS_PER_TOKEN)
    wide = len(_WIDE.findall(text))
    return math.ceil((len(text) - wide) / LATIN_CHARS_PER_TOKEN + wide * WIDE_TOKENS_PER_CHAR)


def share_of(tokens: int, part_chars: int, whole_chars: int) -> int:
    """The tokens of ``part_chars`` out of a message of ``whole_chars`` that cost ``tokens``."""
    if whole_chars <= 0:
        return 0
    return round(tokens * min(part_chars, whole_chars) / whole_chars)
