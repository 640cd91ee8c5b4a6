"""The client's output budget, shared by every upstream attempt of one response.

A client that asks for ``max_tokens: 700`` pays for at most about 700 output tokens, whatever
happens inside the proxy. So a continuation is sent with what is left of that budget: the
tokens the earlier attempts generated (their kept text and the pruned loop alike) are taken
off. A cut attempt never reaches its end-of-message usage, so its tokens are estimated: the
deltas it streamed (OpenAI-compatible servers send about one token per delta), or its text,
whichever says more, unless the upstream already reported more.
"""

from __future__ import annotations

# A continuation with less room than this cannot finish anything useful: the response ends
# with the budget's own finish reason instead.
MIN_RESUME_TOKENS = 16

# Tokenizers differ, and the estimate errs on the side of the client's budget: one token per
# digit (the tokenizers of most open models split numbers into digits; OpenAI's into groups of
# three), three other ASCII chars per token (English prose takes about four, code and
# numbered lists fewer), and two tokens for any other char (a byte-level vocabulary without
# merges for CJK spends two or three on one char; a multilingual one less than one).
_ASCII_CHARS_PER_TOKEN = 3
_TOKENS_PER_OTHER_CHAR = 2
_DIGITS = "0123456789"


def estimate_tokens(text: str) -> int:
    """Output tokens that ``text`` took to generate, on the high side."""
    # all in C: a long loop is a long text
    digits = sum(map(text.count, _DIGITS))
    ascii_chars = len(text) if text.isascii() else len(text.encode("ascii", "ignore"))
    other = len(text) - ascii_chars
    return (
        digits
        + -(-(ascii_chars - digits) // _ASCII_CHARS_PER_TOKEN)
        + _TOKENS_PER_OTHER_CHAR * other
    )


def tokens_left(budget: int | None, spent: int) -> int | None:
    """What a continuation may still generate (None: the client set no budget)."""
    if budget is None:
        return None
    return max(0, budget - spent)
