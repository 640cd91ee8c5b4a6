"""``looprescue demo``: stream bundled examples through the detector, as a proxy would."""

from __future__ import annotations

import json
import random
import sys
import time
from importlib import resources

import typer
from rich.console import Console
from rich.panel import Panel

from looprescue.config import LoopRescueConfig
from looprescue.corpus import random_deltas
from looprescue.detect import StreamDetector
from looprescue.detect.text import excerpt
from looprescue.proxy.anthropic import AnthropicWire
from looprescue.rescue.engine import RescueEngine
from looprescue.rescue.events import (
    BlockStarted,
    BlockStopped,
    EmitDelta,
    EmitFinish,
    EmitMarker,
    FinishReported,
    MessageEnded,
    MessageStarted,
    ReasoningDelta,
    SendRequest,
    TextDelta,
    Usage,
    UsageReported,
)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)


def load_examples() -> list[dict]:
    source = resources.files("looprescue.examples").joinpath("demo.json")
    return json.loads(source.read_text(encoding="utf-8"))


def demo_command(
    delay_ms: float = typer.Option(4.0, "--delay-ms", help="Pause between deltas (0: no pause)."),
    seed: int = typer.Option(1, "--seed", help="Seed of the 2-6 char delta split."),
) -> None:
    """Stream a looping reasoning example, a looping answer and a healthy answer.

    Text is printed only once the detector marks it safe, so a loop never reaches the screen:
    you see where the detector fires, which rule fired, and what is kept.
    """
    console = Console(highlight=False)
    rng = random.Random(seed)
    examples = load_examples()
    for example in examples:
        console.rule(f"[bold]{example['name']}[/bold]: {example['about']}")
        _stream_one(console, example, rng, delay_ms / 1000.0)
        console.print()
    rescued = next(e for e in examples if "continuation" in e)
    console.rule("[bold]rescue[/bold]: the same loop through the rescue engine, as a proxy runs it")
    _rescue_one(console, rescued, rng, delay_ms / 1000.0)
    console.print()


def _stream_one(console: Console, example: dict, rng: random.Random, pause: float) -> None:
    channel, text = example["channel"], example["text"]
    detector = StreamDetector(watch="both")
    released = 0
    out = sys.stdout

    def release(upto: int) -> None:
        nonlocal released
        if upto > released:
            out.write(text[released:upto])
            out.flush()
            released = upto

    hit = None
    for delta in random_deltas(text, rng):
        hit = detector.feed(channel, delta)
        if hit is not None:
            break
        release(detector.safe_offset(channel))
        if pause:
            time.sleep(pause)
    if hit is None:
        hit = detector.flush(channel)
    if hit is None:
        release(len(text))
        console.print()
        console.print(
            Panel(f"no loop: all {len(text)} chars streamed through", border_style="green")
        )
        return
    leaked = max(0, released - hit.prune_offset)
    release(hit.prune_offset)
    removed = hit.fired_at - hit.prune_offset
    console.print(f"\n[dim]〔{removed} chars of repeated {channel} removed〕[/dim]")
    console.print(
        Panel(
            f"rule [bold]{hit.rule}[/bold] fired on the {channel} channel after "
            f"{hit.fired_at} chars\n"
            f"loop starts at {hit.loop_start}; kept the first {hit.prune_offset} chars "
            f"(ends: “{excerpt(text[max(0, hit.prune_offset - 60) : hit.prune_offset], 60)}”)\n"
            f"repeats so far: {hit.repeats}"
            + (f", period {hit.period} chars" if hit.period else "")
            + f"\nevidence: {hit.evidence}\n"
            f"looping chars that reached the screen: {leaked}",
            title="loop detected",
            border_style="red",
        )
    )


def _response_events(reasoning: str, text: str, rng: random.Random, message_id: str) -> list:
    """One scripted upstream response as engine events, in 2-6 char deltas."""
    events: list = [MessageStarted(message_id, "deepseek-demo", Usage(176, 0, 0, 0))]
    for index, (kind, body) in enumerate((("reasoning", reasoning), ("text", text))):
        if not body:
            continue
        events.append(BlockStarted(index, kind))
        delta_type = ReasoningDelta if kind == "reasoning" else TextDelta
        events += [delta_type(index, piece) for piece in random_deltas(body, rng)]
        events.append(BlockStopped(index))
    events += [
        UsageReported(Usage(output_tokens=len(reasoning + text) // 4)),
        FinishReported("stop", "end_turn"),
        MessageEnded(),
    ]
    return events


def _rescue_one(console: Console, example: dict, rng: random.Random, pause: float) -> None:
    """Drive the sans-IO rescue engine like the proxy does: the first upstream response loops
    in its reasoning; the engine cuts it and asks for a continuation, which is scripted here."""
    request = {
        "model": "deepseek-demo",
        "stream": True,
        "messages": [{"role": "user", "content": "Make the config loader reject unknown keys."}],
    }
    engine = RescueEngine(LoopRescueConfig(), AnthropicWire(), request)
    follow_up = example["continuation"]
    streams = [_response_events(example["text"], "", rng, "msg_demo_1")]
    resumes: list[SendRequest] = []
    out = sys.stdout
    last_kind = None
    while streams:
        for event in streams.pop(0):
            for item in engine.feed(event):
                if isinstance(item, EmitDelta | EmitMarker):
                    if item.kind != last_kind:
                        out.write(f"\n[{item.kind}] ")
                        last_kind = item.kind
                    out.write(item.text if isinstance(item, EmitDelta) else f"\n{item.text}\n")
                    out.flush()
                elif isinstance(item, SendRequest):
                    resumes.append(item)
                    reply = _response_events(
                        follow_up["reasoning"], follow_up["text"], rng, "msg_demo_2"
                    )
                    streams.append(reply)
                elif isinstance(item, EmitFinish):
                    out.write("\n")
            if pause:
                time.sleep(pause)
            if streams or engine.done:
                break  # the engine closed this upstream stream (CloseUpstream) or finished
    stats = engine.stats
    correction = _last_user_text(resumes[0].body) if resumes else ""
    console.print(
        Panel(
            f"loops detected: {stats.detections}, upstream requests: {1 + len(resumes)}\n"
            f"loop chars removed: {stats.pruned_chars}\n"
            f"loop chars that reached the client: {stats.leaked_loop_chars}\n"
            f"the continuation request ends with this correction:\n“{excerpt(correction, 300)}”",
            title="rescued in one response",
            border_style="green",
        )
    )


def _last_user_text(body) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""
