"""Rule opener: line after line opens with the same long head, its tail changing among a few."""

from __future__ import annotations

import random

import pytest
from tests.detect_helpers import released_and_hit, stream

from looprescue.config import DetectorConfig
from looprescue.detect import scan_text

CHANNELS = ["text", "reasoning"]
LEAD = "The user wants the current price. I have a tool for that, so I will use it.\n\n"


def announcing(head: str, tails: list[str], lines: int, seed: int = 0) -> str:
    """``lines`` lines that open with ``head`` and end with a tail drawn from ``tails``."""
    rng = random.Random(seed)
    return "".join(f"{head}{rng.choice(tails)}\n" for _ in range(lines))


EN_HEAD = 'I\'ll call the get_stock_price tool with {"symbol": "AAPL"}'
EN_TAILS = [
    ".",
    " now.",
    " to get the latest price.",
    ". The tool should give me the last trade price.",
]
# 19 CJK chars: 24 wide or more only when a CJK char counts as two
ZH_HEAD = "我现在就调用天气工具查询北京明天的天气"
ZH_TAILS = ["。", "。好。", "，然后根据返回结果回答用户。", "，等工具返回后再整理答案。"]


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(("head", "tails"), [(EN_HEAD, EN_TAILS), (ZH_HEAD, ZH_TAILS)])
def test_an_agent_saying_again_what_it_will_call_is_cut_after_its_first_line(channel, head, tails):
    loop = announcing(head, tails, 40)
    text = LEAD + loop
    first = loop.index("\n") + 1
    # (opener's own verdict: ``rehash`` also finds the tails drawn again, a line later)
    only = DetectorConfig(ignore=("rehash",))
    for hit in (scan_text(text, channel, only)[0], stream(text, channel, config=only)):
        assert hit.rule == "opener"
        assert hit.loop_start == len(LEAD)
        assert hit.prune_offset == len(LEAD) + first  # one line kept
        assert hit.fired_at - len(LEAD) < 14 * (len(head) + 20)
    for seed in range(3):
        released, hit = released_and_hit(text, channel, seed, only)
        assert hit is not None and released <= hit.prune_offset + hit.lead_in


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    "text",
    [
        # one case after another: every line says something new after the same head
        "".join(
            f"Let me check whether the number {n} divides 2520 evenly: {2520 // n}.\n"
            for n in range(1, 30)
        ),
        "".join(
            f"Now I will read the next file in the list, which is src/{name}.py.\n"
            for name in ("app", "db", "cli", "api", "auth", "cache", "jobs", "mail")
        ),
        # a log's readings: lines that differ in a number alone
        "".join(
            f"INFO heartbeat ok from the worker (latency {random.Random(n).randint(3, 140)} ms)\n"
            for n in range(40)
        ),
        # short openers come back in healthy reasoning
        "".join(f"Wait, let me {verb} this again.\n" for verb in ["check", "redo", "see"] * 8),
        # a divider, and code in a fence
        "Results\n" + ("-" * 80 + "\n") * 30,
        "```python\n"
        + 'print("processing the next batch of records now", flush=True)\n' * 12
        + 'print("processing the next batch of records now", end="")\n' * 12
        + "```\n",
        # a line said again now and then between new ones is no run
        "".join(
            f"I'll call the weather tool for the forecast. {city} is next.\n"
            f"The forecast for {city} came back without errors.\n"
            for city in ("Oslo", "Rome", "Lima", "Pune", "Kyiv", "Bern", "Doha", "Suva")
        ),
    ],
    ids=["cases", "files", "log", "short-openers", "divider", "fenced-code", "interleaved"],
)
def test_lines_that_open_alike_for_a_reason_are_no_loop(channel, text):
    hits = scan_text(text, channel=channel)
    assert not hits or hits[0].rule != "opener"
    assert stream(text, channel) is None or stream(text, channel).rule != "opener"


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_run_needs_six_lines_and_repeated_ones(channel):
    # five lines open alike and then the reasoning moves on: no loop
    text = LEAD + announcing(EN_HEAD, EN_TAILS, 5) + "The tool returned 187.20, so I can answer.\n"
    assert stream(text, channel) is None
    # every line's tail new: the run says something new each time
    tails = [f" for the {n}th time, with a new reason." for n in range(40)]
    assert stream(LEAD + announcing(EN_HEAD, tails, 40), channel) is None


def test_a_long_run_of_new_lines_keeps_a_bounded_memory():
    from looprescue.detect.channel import ChannelDetector
    from looprescue.detect.rules.opener import MAX_SEEN

    detector = ChannelDetector("reasoning", DetectorConfig())
    rule = detector.rule("opener")
    for n in range(1000):
        assert detector.feed(f"Now I will read the next file in the list: src/mod_{n}.py\n") is None
        assert len(rule._seen) <= MAX_SEEN
