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

from looprescue.corpus import random_deltas
from looprescue.detect import StreamDetector
from looprescue.detect.text import excerpt


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
    for example in load_examples():
        console.rule(f"[bold]{example['name']}[/bold]: {example['about']}")
        _stream_one(console, example, rng, delay_ms / 1000.0)
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
