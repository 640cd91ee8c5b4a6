"""History sanitization: what it costs a request with a long history, on its first request
(every text scanned) and on the conversation's later turns (cached verdicts, only the new
assistant message scanned), against the same request with ``sanitizeHistory: false``.

Each figure is the CPU time (time.process_time) of what the proxy does with a rescued request
before it goes upstream: parse the body, judge it, start the engine (which sanitizes), and
serialize the body when it changed; best of a few passes.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.textgen import healthy_text, looping_text
from looprescue.config import LoopRescueConfig
from looprescue.proxy.service import Prepared, RescueService
from looprescue.rescue.engine import RescueEngine
from looprescue.rescue.events import SendRequest
from looprescue.wire import jsonfast
from looprescue.wire.openai import OpenAIWire

TURNS = 200
REASONING_CHARS = 2000
TEXT_CHARS = 1000
LOOP_EVERY = 25  # one assistant message in this many carries a loop in its reasoning
LATER_TURNS = 20
PASSES = 3


def history(turns: int, seed: int = 0) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"Step {turn}: go on."})
        looping = turn % LOOP_EVERY == LOOP_EVERY - 1
        reasoning = (
            looping_text(REASONING_CHARS, seed + turn)
            if looping
            else healthy_text(REASONING_CHARS, seed + turn)
        )
        messages.append(
            {
                "role": "assistant",
                "content": healthy_text(TEXT_CHARS, seed + 10_000 + turn),
                "reasoning_content": reasoning,
            }
        )
    messages.append({"role": "user", "content": "Finish the task."})
    return messages


def request(messages: list[dict[str, Any]]) -> bytes:
    return jsonfast.dumps({"model": "deepseek-chat", "stream": True, "messages": messages})


def prepare(service: RescueService, raw: bytes) -> int:
    """What the proxy does with ``raw`` before sending it; returns the chars it removed."""
    prepared = service.judge_now(OpenAIWire, {"x-looprescue-session": "bench"}, raw)
    assert isinstance(prepared, Prepared)
    engine = RescueEngine(
        service.config,
        prepared.wire,
        prepared.body,
        lang="en",
        history_cache=service.history,
        conversation_key=prepared.key,
    )
    (first,) = [item for item in engine.start() if isinstance(item, SendRequest)]
    if first.changed:
        jsonfast.dumps(first.body)
    return engine.stats.history_removed_chars


def timed(work: Any) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def main() -> None:
    base = history(TURNS)
    raw = request(base)
    later = [
        request([*base[:-1], *history(turn + 1, seed=50_000)[-3:-1], base[-1]])
        for turn in range(LATER_TURNS)
    ]
    off = LoopRescueConfig(sanitizeHistory=False)
    on = LoopRescueConfig()
    baseline = min(timed(lambda: prepare(RescueService(off), raw)) for _ in range(PASSES))
    removed = prepare(RescueService(on), raw)
    cold = min(timed(lambda: prepare(RescueService(on), raw)) for _ in range(PASSES))

    def turns() -> None:
        service = RescueService(on)
        prepare(service, raw)
        start = time.process_time()
        for body in later:
            prepare(service, body)
        spent.append((time.process_time() - start) / len(later))

    spent: list[float] = []
    for _ in range(PASSES):
        turns()
    warm = min(spent)
    chars = sum(
        len(m.get("content") or "") + len(m.get("reasoning_content") or "")
        for m in base
        if m["role"] == "assistant"
    )
    print(
        f"a request with {TURNS} earlier assistant messages ({chars / 1e6:.2f} M chars of "
        f"reasoning and text, {len(raw) / 1e6:.2f} MB of JSON; one in {LOOP_EVERY} loops, "
        f"{removed} chars pruned): CPU ms per request before it goes upstream, best of {PASSES}"
    )
    print(f"{'case':<44} {'ms':>8} {'x off':>7}")
    rows = [
        ("sanitizeHistory: false (baseline)", baseline),
        ("first request (nothing cached)", cold),
        (f"later turns (+1 exchange each, mean of {LATER_TURNS})", warm),
    ]
    for name, value in rows:
        print(f"{name:<44} {value * 1e3:>8.2f} {value / baseline:>6.2f}x")


if __name__ == "__main__":
    main()
