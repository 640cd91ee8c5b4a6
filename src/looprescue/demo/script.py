"""What the demo's scripted model says: a reply for each stage of the conversation.

The model is asked to make a config loader reject unknown keys. Left alone it loops twice: its
reasoning falls into a rotation of short phrases, and its answer then re-emits one paragraph
until the token limit. Told about a loop (the proxy's continuation request), it behaves: after
the reasoning loop it reasons properly but its answer still falls into the paragraph cycle;
after the text loop it finishes the answer.

Pure: a request body in, a :class:`Reply` out. The server (``model.py``) streams it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PROMPT = "Make the config loader reject unknown keys, and tell me what changed."
MODEL_NAME = "demo-looper"

PLANNING = (
    "The user wants the config loader to reject unknown keys. The loader is in config.py: "
    "load_config reads the YAML file and validates it with pydantic. I should set "
    "extra='forbid' on every section model, make the error name the dotted key, and add a "
    "test for a typo such as 'detector.poolWindw'. That covers it. Now I just need to write "
    "the answer.\n\n"
)
ROTATION = ("Now.", "OK.", "Emit.", "Output.", "Go.", "Let me write.", "Producing.", "OK, output.")
ROTATION_CHARS = 1800

BETTER_REASONING = (
    "Right: forbid extra keys on every section model, name the dotted key in the error, and "
    "cover a misspelt detector key with a test. I will summarise the change for the user.\n"
)
INTRO = (
    "## What changed\n\n"
    "Every section model of the configuration now sets `extra='forbid'`, so a misspelt key "
    "fails at load time instead of silently falling back to its default.\n\n"
)
CYCLE = (
    "I have finished the change: each section of the configuration rejects unknown keys, the "
    "error names the dotted key and the reason, and a new test covers a misspelt detector "
    "key. The loader still accepts an empty file and applies the defaults. "
)
CLOSING_REASONING = "The summary is written once; add how to check it and stop.\n"
CLOSING = (
    "To check it, run `make test`: the new test loads `detector: {poolWindw: 40}` and "
    "expects the error `detector.poolWindw: unknown key`."
)


@dataclass(frozen=True, slots=True)
class Reply:
    """One response: reasoning, then text. With ``loops`` the text repeats its last part
    (``cycle``) until the request's token limit; otherwise it ends."""

    stage: int
    reasoning: str
    text: str
    cycle: str = ""

    def body(self, max_chars: int) -> tuple[str, str, bool]:
        """(reasoning, text, cut at the limit) within ``max_chars`` of output."""
        text = self.text
        if self.cycle:
            copies = max(0, max_chars - len(self.reasoning) - len(text)) // len(self.cycle) + 1
            text += self.cycle * copies
        reasoning = self.reasoning[:max_chars]
        room = max_chars - len(reasoning)
        limited = len(self.reasoning) + len(text) > max_chars
        return reasoning, text[: max(0, room)], limited


def rotation(chars: int, seed: int = 7) -> str:
    """Short phrases drawn at random, never the same twice in a row: a pool with no period."""
    rng = random.Random(seed)
    words: list[str] = []
    total, last = 0, None
    while total < chars:
        phrase = rng.choice([p for p in ROTATION if p != last])
        words.append(phrase)
        total += len(phrase) + 1
        last = phrase
    return " ".join(words)


def stage_of(body: Mapping[str, Any]) -> int:
    """0: the user's own request; 1: told about a loop (a second user text) before any
    answer text was kept; 2: told after part of the answer was kept (the request carries it as
    an assistant message)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    user_texts = 0
    answered = False
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        pieces = 1 if isinstance(content, str) else len(content or ())
        if message.get("role") == "user":
            user_texts += pieces
        elif message.get("role") == "assistant":
            answered = True
    if user_texts < 2:
        return 0
    return 2 if answered else 1


def reply_for(body: Mapping[str, Any]) -> Reply:
    stage = stage_of(body)
    if stage == 0:
        return Reply(0, PLANNING + rotation(ROTATION_CHARS), INTRO, cycle=CYCLE)
    if stage == 1:
        return Reply(1, BETTER_REASONING, INTRO, cycle=CYCLE)
    return Reply(2, CLOSING_REASONING, CLOSING)
