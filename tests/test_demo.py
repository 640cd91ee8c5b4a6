"""``looprescue demo``: loops are cut before they reach the screen; healthy text streams through."""

from __future__ import annotations

import functools
import subprocess
import sys

from looprescue.commands.demo import load_examples
from looprescue.detect import scan_text


@functools.cache
def _run_demo() -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "looprescue.cli", "demo", "--delay-ms", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_bundled_examples_are_two_loops_and_one_healthy_answer():
    verdicts = {e["name"]: scan_text(e["text"], e["channel"]) for e in load_examples()}
    assert verdicts["reasoning loop"] and verdicts["paragraph loop"]
    assert verdicts["healthy answer"] == []


def test_demo_prints_where_it_fired_and_leaks_nothing():
    result = _run_demo()
    out = result.stdout
    assert out.count("loop detected") == 2
    assert "rule pool" in out or "rule cycle" in out
    assert out.count("looping chars that reached the screen: 0") == 2
    assert "no loop: all" in out
    examples = {e["name"]: e for e in load_examples()}
    looping = examples["reasoning loop"]["text"]
    hit = scan_text(looping, "reasoning")[0]
    # what reached the screen ends where the detector said to cut
    assert looping[: hit.prune_offset][-40:].replace("\n", "") in out.replace("\n", "")
    assert looping[hit.prune_offset : hit.fired_at] not in out


def test_demo_rescues_the_reasoning_loop_in_one_response():
    result = _run_demo()
    rescue_part = result.stdout.split("rescue: the same loop")[1]
    continuation = next(e for e in load_examples() if "continuation" in e)["continuation"]
    assert (
        continuation["text"] in rescue_part.replace("\n", " ")
        or continuation["text"][:60] in rescue_part
    )
    assert "repeated reasoning removed" in rescue_part
    assert "upstream requests: 2" in rescue_part
    assert "loop chars that reached the client: 0" in rescue_part
    assert "Now. OK. Emit. Producing. Now. OK." not in rescue_part
