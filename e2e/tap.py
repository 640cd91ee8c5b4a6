"""A transparent relay in front of the model server that counts the tokens it streams.

llama-cpp-python's server sends no ``usage`` in streamed responses, and the proxy adds up
usage only when the upstream sends it. So tokens are counted where they are produced: the
relay forwards each request unchanged, collects the text each response streamed, and when the
response ends (finished, or closed by the proxy's cut) has the model server's own tokenizer
count it (``/extras/tokenize/count``); a response that ran out of budget used exactly its
``max_tokens``. Counting chunks alone would undercount: llama-cpp-python holds back a token
that ends inside a UTF-8 character and sends it with the next one, which is frequent in
Chinese text. Every request, direct or from the proxy, goes through the relay, so
both sides are counted the same way.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from e2e.model import free_port


@dataclass
class Exchange:
    body: dict
    tokens: int = 0
    chunks: int = 0
    finish_reason: str | None = None
    text: list[str] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    # monotonic times of the first and the last streamed piece of text
    first_at: float | None = None
    last_at: float | None = None

    @property
    def chars_per_s(self) -> float | None:
        """How fast the model wrote this response, first piece to last: the hold bound
        (``holdMaxMs``) lets more of a loop through the slower the model writes."""
        if self.first_at is None or self.last_at is None or self.last_at <= self.first_at:
            return None
        return sum(len(piece) for piece in self.text[1:]) / (self.last_at - self.first_at)


class Tap:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[Exchange] = []
        self._bos: int | None = None
        self._lock = threading.Lock()
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10))
        app = Starlette(routes=[Route("/{path:path}", self._relay, methods=["GET", "POST"])])
        self.port = free_port()
        self._server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Tap:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the token-counting relay did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    def mark(self) -> int:
        """The number of requests relayed so far: requests are made one prompt at a time, so
        the exchanges after a mark belong to the prompt sent after it."""
        with self._lock:
            return len(self.exchanges)

    def since(self, mark: int, timeout: float = 30) -> list[Exchange]:
        """The exchanges after ``mark``, each ended and its streamed text counted."""
        with self._lock:
            exchanges = self.exchanges[mark:]
        for exchange in exchanges:
            exchange.done.wait(timeout)
            if exchange.body.get("stream"):
                exchange.tokens = self._tokens_of(exchange)
        return exchanges

    def _tokens_of(self, exchange: Exchange) -> int:
        """Tokens the model generated for a streamed response: exactly ``max_tokens`` when it
        ran out of budget; otherwise the text re-tokenized, or the number of chunks when that
        is more (each chunk holds at least one token). For garbled CJK the model may generate
        byte tokens that re-tokenize into fewer, so a response the proxy cut is a lower bound."""
        budget = exchange.body.get("max_tokens") or exchange.body.get("max_completion_tokens")
        if exchange.finish_reason == "length" and budget:
            return int(budget)
        return max(exchange.chunks, self._count_tokens("".join(exchange.text)))

    def _count_tokens(self, text: str) -> int:
        if not text:
            return 0
        if self._bos is None:  # what the tokenizer adds to any input (a BOS token, or nothing)
            self._bos = self._tokenize_count("")
        return self._tokenize_count(text) - self._bos

    def _tokenize_count(self, text: str) -> int:
        url = f"{self.upstream}/extras/tokenize/count"
        reply = httpx.post(url, json={"input": text}, timeout=60)
        reply.raise_for_status()
        return reply.json()["count"]

    async def _relay(self, request: Request) -> Response:
        raw = await request.body()
        url = f"{self.upstream}/{request.path_params['path']}"
        headers = {"content-type": request.headers.get("content-type", "application/json")}
        if request.method == "GET":
            reply = await self._client.get(url)
            return Response(reply.content, reply.status_code, media_type="application/json")
        body = json.loads(raw) if raw else {}
        exchange = Exchange(body)
        with self._lock:
            self.exchanges.append(exchange)
        upstream = self._client.build_request("POST", url, content=raw, headers=headers)
        reply = await self._client.send(upstream, stream=True)
        if not body.get("stream"):
            content = await reply.aread()
            await reply.aclose()
            if reply.status_code == 200:
                data = json.loads(content)
                exchange.tokens = data.get("usage", {}).get("completion_tokens", 0)
                exchange.finish_reason = data["choices"][0].get("finish_reason")
            exchange.done.set()
            return Response(content, reply.status_code, media_type="application/json")

        async def stream():
            buffer = b""
            try:
                async for chunk in reply.aiter_raw():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        self._count(exchange, line)
                    yield chunk
            except httpx.HTTPError:
                # the proxy cut the stream (a loop confirmed) and the model server stopped
                # mid-response: what was streamed so far is all there is to count
                return
            finally:
                # set first: the rest of this block may be cancelled with the response's task
                exchange.done.set()
                await reply.aclose()

        return StreamingResponse(
            stream(), reply.status_code, media_type=reply.headers.get("content-type")
        )

    @staticmethod
    def _count(exchange: Exchange, line: bytes) -> None:
        if not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
            return
        try:
            choice = json.loads(line[5:])["choices"][0]
        except (ValueError, KeyError, IndexError):
            return
        content = (choice.get("delta") or {}).get("content")
        if content:
            now = time.monotonic()
            if exchange.first_at is None:
                exchange.first_at = now
            exchange.last_at = now
            exchange.chunks += 1
            exchange.text.append(content)
        if choice.get("finish_reason"):
            exchange.finish_reason = choice["finish_reason"]
