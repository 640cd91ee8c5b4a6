"""``proxy.coalesceMs`` through the real proxy and the real anthropic SDK: in ``rescue`` the
reads of an interval reach the client together, in ``observe`` every read goes on as it comes."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream
from tests.test_proxy_http import anthropic_client, serve

# one sentence in 12 deltas 80 ms apart (no full stop until the end: nothing for the watermark
# to hold back for long)
TEXT = "the loader reads each block once and writes it out again in order, then stops."


def arrival_bursts(upstream: ScriptedUpstream, **overrides: Any) -> tuple[int, str]:
    """How many bursts the client's text deltas came in (gaps over 40 ms between them), and
    the text."""
    upstream.enqueue(ScriptedResponse(text=TEXT, delta_chars=(7, 7), delay=0.08))
    with serve(upstream, **overrides) as proxy:
        arrivals, text = [], []
        with anthropic_client(proxy).messages.stream(
            model="deepseek-flash",
            max_tokens=1024,
            messages=[{"role": "user", "content": "Explain the loader."}],
        ) as stream:
            for event in stream:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    arrivals.append(time.monotonic())
                    text.append(event.delta.text)
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    return 1 + sum(gap > 0.04 for gap in gaps), "".join(text)


@pytest.mark.parametrize(
    ("mode", "coalesce_ms", "most", "least"),
    [
        ("rescue", 1000, 3, 1),  # the first read, then the rest together at the end
        ("rescue", 0, 12, 5),  # read by read
        ("observe", 1000, 12, 5),  # observe never waits
    ],
)
def test_reads_reach_the_client_as_the_mode_and_interval_say(
    scripted_upstream: ScriptedUpstream, mode: str, coalesce_ms: int, most: int, least: int
) -> None:
    bursts, text = arrival_bursts(scripted_upstream, mode=mode, proxy={"coalesceMs": coalesce_ms})
    assert text == TEXT
    assert least <= bursts <= most
