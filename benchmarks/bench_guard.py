"""The tool-loop guard: what judging a request's history costs, on a long agent history of
file reads (the results the guard normalises), the first time a process sees it (every
result normalised) and on the conversation's next request (digests reused by call id, only the
new call normalised).

Each figure is the CPU time (time.process_time) of ``ToolGuard.judge`` on the parsed body, the
best of a few passes; the body's parse (which the proxy does anyway) is shown for scale.
"""

from __future__ import annotations

import random
import time
from typing import Any

from benchmarks.textgen import healthy_text
from looprescue.config import LoopRescueConfig
from looprescue.guard import ToolGuard
from looprescue.wire import jsonfast
from looprescue.wire.anthropic import AnthropicWire

CALLS = (50, 300)
RESULT_LINES = 60
PASSES = 3


def body(calls: int, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Refactor the loader."}]
    for number in range(calls):
        call_id = f"toolu_{seed:04d}_{number:05d}"
        path = f"src/pkg/module_{number}.py"
        use = {"type": "tool_use", "id": call_id, "name": "read", "input": {"path": path}}
        lines = [
            f"{i:4d}  value_{i} = {rng.random():.6f}  # {healthy_text(40, number)}"
            for i in range(RESULT_LINES)
        ]
        result = {"type": "tool_result", "tool_use_id": call_id, "content": "\n".join(lines)}
        messages.append({"role": "assistant", "content": [use]})
        messages.append({"role": "user", "content": [result]})
    return {"model": "claude-sonnet", "max_tokens": 1024, "messages": messages}


def cpu_ms(work: Any) -> float:
    start = time.process_time()
    work()
    return (time.process_time() - start) * 1000


def measure(config: LoopRescueConfig, calls: int) -> tuple[int, float, float, float]:
    """Body bytes, then the best parse, first and next judgement in milliseconds."""
    request, later = body(calls), body(calls + 1)  # the next request: one more call
    raw = jsonfast.dumps(request)
    wire = AnthropicWire(request)
    parse, first, next_ms = [], [], []
    for _ in range(PASSES):
        parse.append(cpu_ms(lambda: jsonfast.loads(raw)))
        guard = ToolGuard(config)  # a fresh guard: nothing of this conversation seen yet
        first.append(cpu_ms(lambda guard=guard: guard.judge(wire, request)))
        next_ms.append(cpu_ms(lambda guard=guard: guard.judge(wire, later)))
    return len(raw), min(parse), min(first), min(next_ms)


def main() -> None:
    config = LoopRescueConfig()
    print(f"{'calls':>6} {'body KB':>8} {'parse ms':>9} {'first ms':>9} {'next ms':>8}")
    for calls in CALLS:
        size, parse, first, next_ms = measure(config, calls)
        print(f"{calls:>6} {size / 1024:>8.0f} {parse:>9.1f} {first:>9.1f} {next_ms:>8.1f}")


if __name__ == "__main__":
    main()
