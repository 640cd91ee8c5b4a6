"""Real DSH end to end with a phrase pool: none of the pool reaches the session or goes back up.

The first answer's reasoning is a planning paragraph and then a reshuffled pool of seven short
phrases. Through the proxy, DSH must complete with the resumed answer; the session file it
writes must hold none of the pool's phrases; and everything the upstream receives after the cut
(the resume, DSH's title request, a follow-up turn) may hold at most one of them in all: the
one short phrase the correction quotes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from tests.support.dsh_runtime import run_dsh_headless
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream
from tests.test_proxy_dsh_e2e import session_events
from tests.test_proxy_http import ProxyServer

from looprescue.config import LoopRescueConfig
from looprescue.detect import scan_text

pytestmark = pytest.mark.slow

PLANNING = (
    "The user wants the retry budget explained, so I should describe how the backoff doubles "
    "after each failure and where the cap of five attempts comes from. I will also mention that "
    "a Retry-After header from the server overrides the computed delay.\n\n"
)
POOL = [
    "Writing it out.",
    "Emit the answer.",
    "Output follows.",
    "Typing now.",
    "Producing it.",
    "Here it comes.",
    "Next step.",
]
ANSWER = "Each failed attempt doubles the delay, up to five attempts; Retry-After wins."
FOLLOW_UP = "Thanks. And what happens after the fifth attempt?"
SECOND_ANSWER = "After the fifth failed attempt the call gives up and reports the last error."


def _pool_reasoning(seed: int = 11, count: int = 160) -> str:
    rng = random.Random(seed)
    return PLANNING + "\n\n".join(rng.choice(POOL) for _ in range(count)) + "\n\n"


def _pool_phrases_in(text: str) -> int:
    return sum(text.count(phrase) for phrase in POOL)


def test_dsh_keeps_no_pool_phrase_and_sends_at_most_one_back(
    dsh_runtime: Any, tmp_path: Path
) -> None:
    reasoning = _pool_reasoning()
    (hit,) = scan_text(reasoning, "reasoning")
    assert hit.prune_offset == len(PLANNING)  # cut where the batch first appeared
    home, project = tmp_path / ".dsh", tmp_path / "proj"
    with ScriptedUpstream() as upstream:
        upstream.enqueue(
            ScriptedResponse(reasoning=reasoning, text="This answer must never be seen."),
            ScriptedResponse(reasoning="Answer in one sentence.", text=ANSWER),
            ScriptedResponse(reasoning="The caller gets the error.", text=SECOND_ANSWER),
        )
        with ProxyServer(LoopRescueConfig(), upstream.base_url) as proxy:
            first = run_dsh_headless(
                home, project, "Explain the retry budget.", proxy.base_url, runtime=dsh_runtime
            )
            assert first.returncode == 0, first.describe()
            second = run_dsh_headless(
                home,
                project,
                FOLLOW_UP,
                proxy.base_url,
                session_id=first.session_id,
                runtime=dsh_runtime,
            )
            totals = proxy.totals
        requests = upstream.requests

    assert second.returncode == 0, second.describe()
    assert first.final_text == ANSWER and second.final_text == SECOND_ANSWER
    assert totals.rescues == 1 and totals.leaked_loop_chars == 0
    assert totals.kept_loop_chars == 0  # a pool keeps none of its phrases

    # The session file DSH wrote (both turns) holds none of the pool's phrases.
    events = session_events(first.session_dir())
    assert _pool_phrases_in(json.dumps(events, ensure_ascii=False)) == 0
    messages = [e for e in events if e["type"] == "assistant/message"]
    reasoning_kept = "".join(
        b["text"] for b in messages[0]["data"]["message"]["content"] if b["type"] == "reasoning"
    )
    assert reasoning_kept.startswith(PLANNING.strip()[:80])

    # What went upstream after the cut: the resume, DSH's side requests and the next turn.
    looping_request = next(i for i, r in enumerate(requests) if r.purpose == "agent")
    after_cut = requests[looping_request + 1 :]
    assert sum(r.purpose == "agent" for r in after_cut) == 2  # the resume and the follow-up
    quoted = sum(_pool_phrases_in(r.text()) for r in after_cut)
    assert quoted <= 1, quoted
