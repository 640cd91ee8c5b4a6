"""Rule rehash: sentence after sentence says again what a recent one said, in other words."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from tests.detect_helpers import released_and_hit, stream

from looprescue.config import DetectorConfig
from looprescue.detect import scan_text
from looprescue.detect.channel import ChannelDetector

CHANNELS = ["text", "reasoning"]
EN_LEAD = (
    "Sunlight looks white, but it is a mix of every visible colour, from red at about 700 nm "
    "to violet at about 400 nm. In the air it meets molecules far smaller than its waves.\n\n"
)
EN_SAID = (
    "Rayleigh scattering is inversely proportional to the fourth power of the wavelength, "
    "which means that blue light is scattered {} more strongly than red light."
)
EN_WAYS = ["much", "far"]
EN_CONNECTORS = ["Again, ", "That is, ", "Put simply, ", "In other words, "]
ZH_LEAD = (
    "植物叶片里有好几种色素，其中最多的是叶绿素，它们都在叶绿体里，负责吸收光能。"
    "太阳光由不同波长的光组成，从红光到紫光都有。\n\n"
)
ZH_SAID = (
    "叶绿素主要吸收红光和蓝紫光，而对绿光的吸收{}，"
    "绿光大部分被反射出来，所以我们看到的叶子是绿色的。"
)
ZH_WAYS = ["很少", "最少"]
ZH_CONNECTORS = ["总之，", "也就是说，", "换句话说，", "简单来说，"]


def said_again(lead, said, ways, connectors, copies=9, seed=0):
    """``said`` (one of its ``ways``) and then said again and again after a connector, in one
    paragraph. Returns the text and where the first copy after it begins."""
    rng = random.Random(seed)
    sep = " " if said.isascii() else ""
    out = [said.format(ways[0])]
    for _ in range(copies):
        out.append(rng.choice(connectors) + said.format(rng.choice(ways)))
    first = len(lead) + len(out[0]) + len(sep)
    return lead + sep.join(out) + "\n", first


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    ("lead", "said", "ways", "connectors"),
    [(EN_LEAD, EN_SAID, EN_WAYS, EN_CONNECTORS), (ZH_LEAD, ZH_SAID, ZH_WAYS, ZH_CONNECTORS)],
    ids=["en", "zh"],
)
def test_one_sentence_said_again_in_other_words_is_cut_at_its_first_copy(
    channel, lead, said, ways, connectors
):
    text, first = said_again(lead, said, ways, connectors)
    whole = scan_text(text, channel=channel)
    assert whole and whole[0].rule == "rehash"
    hit = whole[0]
    assert hit.prune_offset == first and hit.loop_start == len(lead)
    # by the end of its fifth saying: three copies in a row, one of them bringing no new word
    # (``far`` for ``much`` is new the first time it is said)
    saying = first - len(lead) + max(len(c) for c in connectors)
    assert hit.fired_at <= len(lead) + 5 * saying
    for sizes in ((1,), (3, 7), (64,)):
        assert stream(text, channel, sizes=sizes) == hit
    released, streamed = released_and_hit(text, channel)
    assert streamed is not None and replace(streamed, lead_in=0) == hit
    assert released <= streamed.prune_offset + streamed.lead_in


def _worked_again(lang: str, copies: int, seed: int = 0) -> tuple[str, int]:
    """A count worked out again and again, each sentence said one of two ways (a word or
    two apart) and the sentences of a copy in an order that shifts. Returns the text and where
    its second copy begins."""
    if lang == "zh":
        lead = "钟面一圈是三百六十度，分成十二大格。要算三点四十分时两针的夹角。\n\n"
        ways = [
            ["分针走了四十分钟，每分钟六度，一共转过二百四十度。",
             "分针走了四十分钟，每分钟六度，总共转过二百四十度。"],
            ["时针从三点开始，每分钟走半度，四十分钟又走了二十度。",
             "时针从三点出发，每分钟走半度，四十分钟又走了二十度。"],
            ["所以两针之间相差一百三十度，没有超过一百八十度。",
             "因此两针之间相差一百三十度，没有超过一百八十度。"],
            ["这里要注意时针在这段时间里也在移动，不能按整点算。",
             "这里要记住时针在这段时间里也在移动，不能按整点算。"],
        ]  # fmt: skip
        sep, gap = "", "\n\n等等，再算一遍。\n\n"
    else:
        lead = "A clock shows 3:40. What is the angle between its hands?\n\n"
        ways = [
            ["The minute hand has moved forty minutes at six degrees a minute.",
             "The minute hand has gone forty minutes at six degrees a minute."],
            ["The hour hand starts at three and moves half a degree every minute.",
             "The hour hand begins at three and moves half a degree every minute."],
            ["So the hands are apart by the difference of those two angles.",
             "Hence the hands are apart by the difference of those two angles."],
            ["The trap is to forget that the hour hand keeps moving as well.",
             "The catch is to forget that the hour hand keeps moving as well."],
        ]  # fmt: skip
        sep, gap = " ", "\n\nWait, let me redo it.\n\n"
    rng = random.Random(seed)
    order = list(range(len(ways)))
    copies_said = [sep.join(ways[k][0] for k in order)]
    for _ in range(copies - 1):
        rng.shuffle(order)
        copies_said.append(sep.join(rng.choice(ways[k]) for k in order))
    second = len(lead) + len(copies_said[0]) + len(gap)
    return lead + gap.join(copies_said) + "\n", second


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_passage_worked_again_in_a_shifting_order_is_cut_where_its_copies_begin(channel, lang):
    text, second = _worked_again(lang, 8)
    # (rehash's own verdict: drift may take these paragraphs for copies of one another too)
    only = DetectorConfig(ignore=("drift", "reprise"))
    hit = stream(text, channel, config=only)
    assert hit is not None and hit.rule == "rehash"
    # the first copy is kept, and the connector line after it at most
    first_end = text.index("\n\n", text.index("\n\n") + 2)
    assert first_end <= hit.prune_offset <= second
    whole = stream(text, channel)
    assert whole is not None and whole.prune_offset <= second


def _plan() -> str:
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    routine = "a thirty minute walk in the morning, a light lunch, and an early night."
    return "The plan for the week:\n\n" + "".join(f"{day}: {routine}\n" for day in days)


def _platforms() -> str:
    places = ["Linux", "macOS", "Windows", "FreeBSD", "Alpine", "Debian", "Fedora"]
    return " ".join(
        f"On {place}, every test passes and the build takes about as long as it did before."
        for place in places
    )


def _counting_song() -> str:
    words = ["Seven", "Six", "Five", "Four", "Three", "Two", "One"]
    verses = []
    for k in range(len(words) - 1):
        verses.append(
            f"{words[k]} little paper boats went sailing down the silver stream today,\n"
            "And if one paper boat should drift away around the bend,\n"
            f"There'll be {words[k + 1].lower()} little paper boats sailing down the silver "
            "stream.\n"
        )
    return "\n".join(verses)


def _derivation() -> str:
    # a formula restated with one term changed is the derivation's next step
    return "".join(
        f"From the line above P equals (2 - 2w + w^2) times (a + b + {v}), which leaves "
        f"(2 - w) times (a + b + {v}) plus c^2 + d^2.\n"
        for v in "cdefghk"
    )


def _heartbeats() -> str:
    rng = random.Random(3)
    return "".join(
        f"INFO heartbeat from the worker is fine (latency {rng.randint(3, 9)} ms)\n"
        for _ in range(40)
    )


def _summary() -> str:
    # a point made, explained, and made again once at the end
    point = "Indexes speed up reads because the database can skip rows that cannot match."
    middle = (
        "A B-tree keeps keys in order, so a range scan touches only the pages it needs. "
        "Writes pay for this, since every insert must also update each index on the table. "
        "Covering indexes avoid the table entirely when every column asked for is in them. "
    )
    return f"{point} {middle}In short, {point[0].lower()}{point[1:]}\n"


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    "text",
    [
        _plan(),  # the same routine under each day's own label: items of a plan
        _platforms(),  # a sentence said of each platform in turn: each names a new one
        _counting_song(),  # each verse counts one down: other numbers, no copy
        _derivation(),  # a formula restated with one term changed: its next step
        _heartbeats(),  # a log's readings: lines that differ in their numbers
        _summary(),  # a point made again once, as a summary
    ],
    ids=["plan", "platforms", "song", "derivation", "heartbeats", "summary"],
)
def test_sentences_alike_for_a_reason_are_no_rehash(channel, text):
    assert all(hit.rule != "rehash" for hit in scan_text(text, channel=channel))


def test_nothing_is_held_back_while_sentences_come_back():
    # a trace that restates its point goes out as it comes: the rule takes no part in the
    # watermark, and the channel counts what went out past the cut as the hit's lead-in
    detector = ChannelDetector("reasoning", DetectorConfig())
    assert detector.rule("rehash") not in detector._holding_rules
    text, _ = said_again(EN_LEAD, EN_SAID, EN_WAYS, EN_CONNECTORS)
    released, hit = released_and_hit(text, "reasoning")
    assert hit is not None and hit.rule == "rehash"
    assert released > hit.prune_offset
    assert hit.prune_offset + hit.lead_in == released


def test_the_rule_can_be_switched_off():
    text, _ = said_again(EN_LEAD, EN_SAID, EN_WAYS, EN_CONNECTORS)
    off = DetectorConfig(ignore=("rehash",))
    assert all(hit.rule != "rehash" for hit in scan_text(text, "text", off))


# one token each: a swap is one edit (``double-check`` for ``confirm`` would be two)
_RECHECK_SLOTS = [
    ["check", "confirm", "recheck", "verify"],
    ["7", "seven"],
    ["equals", "gives", "is"],
]


def _rechecks(rng: random.Random, lines: int) -> list[str]:
    """A short check said again line after line, one slot's word swapped each time."""
    choice = [0, 0, 0]
    out = []
    for _ in range(lines):
        slot = rng.randrange(len(choice))
        choice[slot] = rng.randrange(len(_RECHECK_SLOTS[slot]))
        verb, product, verdict = (words[i] for words, i in zip(_RECHECK_SLOTS, choice, strict=True))
        out.append(f"Wait, let me {verb} that {product} times 143 {verdict} 1001.\n")
    return out


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("seed", range(4))
def test_a_short_check_said_again_a_word_swapped_each_time_is_cut(channel, seed):
    # Eight or nine tokens a line: one edit apart is a near copy (SHORT_NEAR), and the lines
    # come back word for word now and then, which makes them stale.
    rng = random.Random(seed)
    lead = "So 1001 = 7 × 11 × 13, and 7 × 143 = 1001.\n"
    loop = _rechecks(rng, 40)
    text = lead + "".join(loop)
    hit = stream(text, channel)
    assert hit is not None and hit.rule == "rehash"
    assert hit.fired_at - len(lead) <= len("".join(loop[:8]))
    assert hit.prune_offset == len(lead) + len(loop[0])  # the check is kept once
