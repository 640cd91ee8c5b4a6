"""The demo's client: streams one Anthropic Messages request and keeps what it received.

It is what a user's program sees: blocks of reasoning and text as they arrive, the stop
reason and the usage the response reported, and when it started and ended.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field

import httpx

from .model import SIDE_HEADER
from .script import MODEL_NAME, PROMPT

MAX_TOKENS = 2048
# what the proxy writes where it removed loop text: 〔1234 chars of repeated reasoning removed〕
MARKER = re.compile(r"〔[^〔〕\n]*〕")


@dataclass
class Block:
    kind: str  # "reasoning" | "text"
    text: str = ""


@dataclass
class Transcript:
    """Everything one client received, updated while the response streams."""

    side: str
    blocks: list[Block] = field(default_factory=list)
    by_index: dict[int, Block] = field(default_factory=dict, repr=False)
    stop_reason: str | None = None
    output_tokens: int | None = None
    error: str | None = None
    started: float = 0.0
    ended: float | None = None

    @property
    def done(self) -> bool:
        return self.ended is not None

    def seconds(self, now: float | None = None) -> float:
        end = self.ended if self.ended is not None else (now or time.monotonic())
        return max(0.0, end - self.started) if self.started else 0.0

    def text_of(self, kind: str) -> str:
        return "".join(block.text for block in self.blocks if block.kind == kind)

    @property
    def chars(self) -> int:
        return sum(len(block.text) for block in self.blocks)

    def markers(self) -> list[str]:
        return [m.group(0) for block in self.blocks for m in MARKER.finditer(block.text)]

    def answer(self) -> str:
        """The visible answer with the proxy's markers taken out."""
        return MARKER.sub("", self.text_of("text")).strip()


def request_body() -> dict:
    return {
        "model": MODEL_NAME,
        "max_tokens": MAX_TOKENS,
        "stream": True,
        "thinking": {"type": "enabled", "budget_tokens": MAX_TOKENS // 2},
        "messages": [{"role": "user", "content": PROMPT}],
    }


async def stream_into(client: httpx.AsyncClient, base_url: str, transcript: Transcript) -> None:
    """POST the demo request to ``base_url`` and record the response into ``transcript``."""
    transcript.started = time.monotonic()
    headers = {SIDE_HEADER: transcript.side, "x-api-key": "demo", "anthropic-version": "2023-06-01"}
    try:
        async with client.stream(
            "POST", base_url + "/v1/messages", json=request_body(), headers=headers
        ) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode("utf-8", "replace")
                transcript.error = f"HTTP {response.status_code}: {body[:200]}"
                return
            buffer = ""
            async for chunk in response.aiter_text():
                buffer += chunk
                *frames, buffer = re.split(r"\r?\n\r?\n", buffer)
                for frame in frames:
                    _apply(transcript, frame)
    except httpx.HTTPError as exc:
        transcript.error = f"{type(exc).__name__}: {exc}"
    finally:
        transcript.ended = time.monotonic()


def _apply(transcript: Transcript, frame: str) -> None:
    data = "\n".join(line[5:].lstrip() for line in frame.splitlines() if line.startswith("data:"))
    if not data:
        return
    try:
        event = json.loads(data)
    except ValueError:
        return
    kind = event.get("type")
    if kind == "content_block_start":
        block_type = (event.get("content_block") or {}).get("type")
        block = Block("reasoning" if block_type == "thinking" else "text")
        transcript.blocks.append(block)
        transcript.by_index[event.get("index", len(transcript.blocks) - 1)] = block
    elif kind == "content_block_delta":
        block = transcript.by_index.get(event.get("index"))
        delta = event.get("delta") or {}
        if block is not None:
            block.text += delta.get("thinking") or delta.get("text") or ""
    elif kind == "message_delta":
        transcript.stop_reason = (event.get("delta") or {}).get("stop_reason")
        transcript.output_tokens = (event.get("usage") or {}).get("output_tokens")
    elif kind == "error":
        transcript.error = str((event.get("error") or {}).get("message") or event)
