"""Run the demo: the scripted model, the real proxy in front of it, and one client through the
proxy and one straight to the model, at the same time. The figures of the summary come from
the model's own ledger (tokens generated), the clients (seconds) and the proxy's audit log
(chars pruned, loop chars that reached the client)."""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from .client import Transcript, stream_into
from .model import DemoModel
from .proxy import ProxyProcess

DIRECT, RESCUED = "direct", "looprescue"
TICK_SECONDS = 1 / 15


@dataclass
class DemoState:
    """What the views show, updated while the demo runs."""

    model_url: str
    proxy_command: str
    direct: Transcript = field(default_factory=lambda: Transcript(DIRECT))
    rescued: Transcript = field(default_factory=lambda: Transcript(RESCUED))
    audit: list[dict[str, Any]] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=lambda: {DIRECT: 0, RESCUED: 0})
    started: float = field(default_factory=time.monotonic)

    @property
    def detections(self) -> list[dict[str, Any]]:
        return [r for r in self.audit if r.get("kind") == "detection"]

    @property
    def tokens_saved(self) -> int:
        return self.tokens[DIRECT] - self.tokens[RESCUED]

    @property
    def seconds_saved(self) -> float:
        return self.direct.seconds() - self.rescued.seconds()

    @property
    def chars_pruned(self) -> int:
        return sum(r.get("chars_pruned", 0) for r in self.detections)

    @property
    def leaked_loop_chars(self) -> int:
        """Loop chars past the cut that reached the client, counted from each loop's onset."""
        return sum(r.get("leaked_loop_chars", 0) for r in self.detections)

    @property
    def kept_loop_chars(self) -> int:
        """The one copy of a periodic loop's unit the client keeps."""
        return sum(r.get("kept_loop_chars", 0) for r in self.detections)


class View(Protocol):
    def starting(self, what: str) -> None: ...

    def tick(self, state: DemoState) -> None: ...

    def close(self, state: DemoState) -> None: ...


def run_demo(view: View, delay: float) -> DemoState:
    """Run everything, let ``view`` show it, return the final state."""
    # the proxy is a process of its own: its start takes a second or two on a slow machine
    view.starting("starting the scripted model and the looprescue proxy on 127.0.0.1 …")
    with (
        tempfile.TemporaryDirectory(prefix="looprescue-demo-") as workdir,
        DemoModel(delay) as model,
        ProxyProcess(model.base_url, Path(workdir)) as proxy,
    ):
        state = DemoState(model.base_url, "looprescue " + " ".join(proxy.arguments()))
        try:
            asyncio.run(_stream_both(state, model, proxy, view))
        finally:
            _observe(state, model, proxy)
            view.close(state)
    return state


def _observe(state: DemoState, model: DemoModel, proxy: ProxyProcess) -> None:
    state.audit = proxy.audit_records()
    for side in (DIRECT, RESCUED):
        state.tokens[side] = sum(g.tokens for g in model.generations(side))


async def _stream_both(state: DemoState, model: DemoModel, proxy: ProxyProcess, view: View) -> None:
    timeout = httpx.Timeout(120, connect=10)
    # trust_env=False: everything stays on loopback, whatever proxy the environment names
    async with httpx.AsyncClient(trust_env=False, timeout=timeout) as client:
        state.started = time.monotonic()
        tasks = [
            asyncio.ensure_future(stream_into(client, model.base_url, state.direct)),
            asyncio.ensure_future(stream_into(client, proxy.base_url, state.rescued)),
        ]
        try:
            while not all(task.done() for task in tasks):
                _observe(state, model, proxy)
                view.tick(state)
                await asyncio.wait(tasks, timeout=TICK_SECONDS)
            for task in tasks:
                task.result()
        finally:
            for task in tasks:
                task.cancel()
