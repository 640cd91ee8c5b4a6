"""Rule ``echo``: the model went on past its own end-of-turn token and echoes the chat.

A chat model ends its answer with a special token (``<|im_end|>``, ``<|eot_id|>``, ``</s>``,
``<｜end▁of▁sentence｜>``…) that the server normally swallows. When the server lets it through
and the model keeps generating, what follows is a made-up next turn: the prompt echoed, a new
``<|im_start|>assistant``, often counting up (``assistant57``, ``assistant58``). Special chat
tokens written as plain text, outside code, several times, are that: ``echoMinTokens`` of them,
one an end of turn, fire; everything from the first end-of-turn token on is cut, since nothing
after it belongs to the answer.

A token quoted in backticks or inside a code fence is documentation, not an echo.
"""

from __future__ import annotations

import re
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.rule import CHECKPOINT, WATERMARK, Rule
from looprescue.detect.segment import Segmenter
from looprescue.detect.text import excerpt

_FEEDS: Final = frozenset({CHECKPOINT, WATERMARK})

# <|name|> (ChatML, Llama 3, Phi), <｜name｜> (DeepSeek, full-width bars), </s> and <s> (Llama 2,
# Mistral), [INST] / [/INST], <start_of_turn> / <end_of_turn> (Gemma).
_TOKEN: Final = re.compile(
    r"<\|[A-Za-z_]{1,32}\|>|<｜[^｜\n]{1,40}｜>|</?s>|\[/?INST\]|<(?:start|end)_of_turn>"
)
_END_OF_TURN: Final = re.compile(
    r"<\|(?:im_end|eot_id|endoftext|end_of_text|end|END_OF_TURN_TOKEN)\|>|<｜end[^｜]*｜>"
    r"|</s>|\[/INST\]|<end_of_turn>"
)
# The longest token the patterns above match, for scanning a little behind a checkpoint.
_LONGEST: Final = 44
# What the end of the text may be while a token is still being written.
_PARTIAL: Final = re.compile(
    r"(?:<\|[A-Za-z_]{0,32}\|?|<｜[^｜\n]{0,40}|</?s?|\[/?(?:I(?:N(?:S)?)?)?|<(?:[a-z_]{0,13}))$"
)


class EchoRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("echo",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        self._channel = channel
        self._need: int = cfg.echoMinTokens
        self._scanned = 0  # tokens starting before this offset have been counted
        self._count = 0
        self._first_end: int | None = None  # start of the first end-of-turn token
        self._first_token: str = ""

    def at_checkpoint(
        self, win: TextWindow, cp: int, final: bool, segmenter: Segmenter
    ) -> Hit | None:
        raw, base = win.raw, win.base
        lo = max(self._scanned - _LONGEST, base) - base
        hi = cp - base
        # every token starts with < or [: most text has neither, and a find is done in C
        angle, bracket = raw.find("<", lo, hi), raw.find("[", lo, hi)
        if angle < 0 and bracket < 0:
            self._scanned = max(self._scanned, cp - _LONGEST)
            return None
        lo = min(p for p in (angle, bracket) if p >= 0)
        for match in _TOKEN.finditer(raw, lo, hi):
            start = match.start() + base
            if start < self._scanned:
                continue
            self._scanned = match.end() + base
            if (start > base and raw[match.start() - 1] == "`") or segmenter.fenced(start):
                continue  # quoted: documentation
            self._count += 1
            if self._first_end is None and _END_OF_TURN.fullmatch(match.group()):
                self._first_end = start
                self._first_token = match.group()
            if self._count >= self._need and self._first_end is not None:
                return Hit(
                    rule="echo",
                    channel=self._channel,
                    prune_offset=self._first_end,
                    loop_start=self._first_end,
                    fired_at=cp,
                    repeats=float(self._count),
                    period=None,
                    evidence=excerpt(win.slice(self._first_end, self._first_end + 80)),
                )
        self._scanned = max(self._scanned, cp - _LONGEST)
        return None

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """Everything from the first end-of-turn token on may still be cut; so may a token
        still being written at the end."""
        if self._first_end is not None:
            return self._first_end
        # Tokens after the last checkpoint are counted at the next one; hold from any end of
        # turn among them already (quoted or not: that is decided then). Every token starts
        # with < or [: most text has neither, and a find is done in C.
        raw, base = win.raw, win.base
        lo = max(self._scanned - _LONGEST, base) - base
        if raw.find("<", lo) < 0 and raw.find("[", lo) < 0:
            return win.synced
        pending = _END_OF_TURN.search(raw, lo)
        if pending is not None:
            return pending.start() + base
        partial = _PARTIAL.search(raw, max(base, win.synced - _LONGEST) - base)
        if partial is not None and partial.start() < partial.end():
            return partial.start() + base
        return win.synced
