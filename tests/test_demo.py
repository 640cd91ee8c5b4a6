"""``looprescue demo``: a scripted looping model, the real proxy in front of it, and a client
through it beside one straight to the model. Without looprescue the loop runs to the token
limit; through it both loops are cut, nothing of them past the cut reaches the client, and the
answer ends."""

from __future__ import annotations

import functools
import io
import re
import subprocess
import sys

from rich.console import Console

from looprescue.demo.client import MARKER, MAX_TOKENS
from looprescue.demo.run import DIRECT, RESCUED, run_demo
from looprescue.demo.script import CLOSING, CYCLE, INTRO, PLANNING, ROTATION, stage_of
from looprescue.demo.view import LiveView, status
from looprescue.detect import scan_text


def flat(text: str) -> str:
    return " ".join(text.split())


@functools.cache
def plain_run() -> subprocess.CompletedProcess:
    """The demo as `make demo` runs it, with stdout a pipe (so: the plain view)."""
    result = subprocess.run(
        [sys.executable, "-m", "looprescue", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_the_model_reacts_to_a_correction_like_the_script_says():
    prompt = {"role": "user", "content": "Fix it."}
    told = {"role": "user", "content": [{"type": "text", "text": "Fix it."}, {"type": "text"}]}
    kept = {"role": "assistant", "content": [{"type": "text", "text": INTRO}]}
    assert stage_of({"messages": [prompt]}) == 0
    assert stage_of({"messages": [told]}) == 1
    assert stage_of({"messages": [prompt, kept, {"role": "user", "content": "go on"}]}) == 2


def test_without_a_terminal_it_prints_plain_text_and_the_figures():
    out = plain_run().stdout
    assert "\x1b[" not in out  # no colours, no cursor moves: a log or a pipe reads it as is
    # the raw stream ran to the token limit
    assert "without looprescue: 2048 tokens generated" in out
    assert "stop reason: max_tokens" in out
    # both cuts and both resumes, as the proxy's audit log recorded them
    assert re.search(r"cut: pool loop in the reasoning, \d+ chars kept, \d+ pruned", out)
    assert re.search(r"cut: cycle loop in the text, \d+ chars kept, \d+ pruned", out)
    assert "resume: continuation request 1" in out and "resume: continuation request 2" in out
    # the figures: tokens from the model's ledger, pruned chars from the audit log, which must
    # agree with the markers the client received
    tokens = re.search(r"tokens generated\W+(\d+)\W+(\d+)\W+(\d+)", out)
    assert tokens is not None, out
    direct, rescued, saved = map(int, tokens.groups())
    assert direct == MAX_TOKENS and 0 < rescued < direct and saved == direct - rescued
    pruned = int(re.search(r"chars pruned: (\d+)", out).group(1))
    markers = [int(n) for n in re.findall(r"〔(\d+) chars of repeated \w+ removed〕", out)]
    assert len(markers) == 1 and pruned > markers[0]  # the answer shows the text marker
    assert "loop chars that reached the client: 0" in out
    # the answer through the proxy: intro, one copy of the paragraph, the closing
    answer = flat(out.split("the answer through looprescue")[1].split("summary")[0])
    assert flat(INTRO) in answer and flat(CLOSING) in answer
    assert answer.count(flat(CYCLE)[:80]) == 1


def test_live_view_on_a_terminal_shows_both_streams_and_cuts_the_loops():
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120, height=40, color_system=None)
    state = run_demo(LiveView(console), delay=0.001)
    shown = screen.getvalue()
    assert "without looprescue" in shown and "through looprescue proxy" in shown
    assert "proxy audit log" in shown and "loop chars that reached the client: 0" in shown

    direct, rescued = state.direct, state.rescued
    assert direct.stop_reason == "max_tokens" and rescued.stop_reason == "end_turn"
    assert state.tokens[DIRECT] == MAX_TOKENS > state.tokens[RESCUED]
    assert [(r["rule"], r["channel"]) for r in state.detections] == [
        ("pool", "reasoning"),
        ("cycle", "text"),
    ]
    assert state.leaked_loop_chars == 0
    # what the client got: the planning kept, no phrase of the rotation, no loop left anywhere
    reasoning = MARKER.sub("", rescued.text_of("reasoning"))
    assert reasoning.startswith(PLANNING.strip()[:200])
    assert not any(phrase in reasoning for phrase in ROTATION)
    for block in rescued.blocks:
        assert scan_text(MARKER.sub("", block.text), block.kind) == []
    pool = state.detections[0]["loop_text"]
    assert pool[:40] not in reasoning
    assert rescued.text_of("text").count(CYCLE.strip()) == 1  # the one copy a cycle keeps
    # every char the proxy removed is announced by a marker the client sees
    announced = sum(int(re.search(r"\d+", m).group(0)) for m in rescued.markers())
    assert announced == state.chars_pruned
    assert rescued.answer().endswith(CLOSING)
    # the direct client saw both loops run on
    assert direct.text_of("text").count(CYCLE) > 10


def test_at_80_columns_the_panels_show_their_whole_footers():
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=80, height=30, color_system=None)
    state = run_demo(LiveView(console), delay=0.001)
    shown = screen.getvalue()
    assert "starting the scripted model and the looprescue proxy" in shown[:200]
    for side in (DIRECT, RESCUED):
        footer = status(state, side, short=True)
        assert len(footer) < 36 and footer in shown, footer
