"""The demo's scripted model: a real HTTP server on 127.0.0.1 that speaks the Anthropic
Messages API (streaming), answers from ``script.py`` and honours ``max_tokens``.

It keeps a ledger of what it generated for each request (the tokens a real provider would
bill, counted up to where the client went away), which is where the demo's token figures
come from.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .script import MODEL_NAME, reply_for

CHARS_PER_TOKEN = 4
SIDE_HEADER = "x-demo-side"


def tokens_for(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


@dataclass
class Generation:
    """What the model generated for one request."""

    side: str
    stage: int
    chars: int = 0
    outcome: str = "streaming"  # end_turn | max_tokens | client went away

    @property
    def tokens(self) -> int:
        return tokens_for(self.chars)


def _event(kind: str, chars: int = 0, **fields: Any) -> tuple[bytes, int]:
    """One SSE frame of the Anthropic stream and the output chars it carries."""
    data = json.dumps({"type": kind, **fields}, ensure_ascii=False)
    return f"event: {kind}\ndata: {data}\n\n".encode(), chars


class DemoModel:
    """``with DemoModel(delay) as model:`` serves on ``model.base_url`` until the block ends."""

    def __init__(self, delay: float = 0.004, seed: int = 1) -> None:
        self.delay = delay
        self.seed = seed
        self.ledger: list[Generation] = []
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def generations(self, side: str) -> list[Generation]:
        with self._lock:
            return [g for g in self.ledger if g.side == side]

    # ----- lifecycle

    def __enter__(self) -> DemoModel:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        app = Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])
        config = uvicorn.Config(
            app, log_config=None, log_level="error", access_log=False, lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._socket = sock
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError("the demo model did not start")
            time.sleep(0.005)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()

    # ----- the API

    async def _messages(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("stream") is not True:
            error = {"type": "invalid_request_error", "message": "the demo model only streams"}
            return JSONResponse({"type": "error", "error": error}, status_code=400)
        reply = reply_for(body)
        limit = body.get("max_tokens")
        max_chars = (limit if isinstance(limit, int) and limit > 0 else 4096) * CHARS_PER_TOKEN
        generation = Generation(request.headers.get(SIDE_HEADER, "client"), reply.stage)
        with self._lock:
            self.ledger.append(generation)
        reasoning, text, limited = reply.body(max_chars)
        stop = "max_tokens" if limited else "end_turn"
        frames = self._frames(reasoning, text, stop)
        return StreamingResponse(
            self._paced(frames, generation, stop), media_type="text/event-stream"
        )

    def _frames(self, reasoning: str, text: str, stop: str) -> list[tuple[bytes, int]]:
        """SSE frames, each with the output chars it carries."""
        rng = random.Random(self.seed)
        message = {
            "id": f"msg_demo_{rng.getrandbits(32):08x}",
            "type": "message",
            "role": "assistant",
            "model": MODEL_NAME,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 120, "output_tokens": 0},
        }
        frames = [_event("message_start", message=message)]
        index = 0
        for kind, content in (("thinking", reasoning), ("text", text)):
            if not content:
                continue
            opening = {"type": kind, kind: "", **({"signature": ""} if kind == "thinking" else {})}
            frames.append(_event("content_block_start", index=index, content_block=opening))
            position = 0
            while position < len(content):
                piece = content[position : position + rng.randint(3, 7)]
                position += len(piece)
                delta = {"type": f"{kind}_delta", kind: piece}
                frames.append(_event("content_block_delta", len(piece), index=index, delta=delta))
            if kind == "thinking":
                signature = {"type": "signature_delta", "signature": "demo-signature"}
                frames.append(_event("content_block_delta", index=index, delta=signature))
            frames.append(_event("content_block_stop", index=index))
            index += 1
        usage = {"output_tokens": tokens_for(len(reasoning) + len(text))}
        frames.append(_event("message_delta", delta={"stop_reason": stop}, usage=usage))
        frames.append(_event("message_stop"))
        return frames

    async def _paced(
        self, frames: list[tuple[bytes, int]], generation: Generation, stop: str
    ) -> AsyncIterator[bytes]:
        outcome = "client went away"
        try:
            for data, chars in frames:
                if chars and self.delay:
                    await asyncio.sleep(self.delay)
                generation.chars += chars
                yield data
            outcome = stop
        finally:
            generation.outcome = outcome
