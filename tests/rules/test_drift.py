"""Rule drift: a block of paragraphs said again and again with a word or two changed."""

from __future__ import annotations

import itertools
import random

import pytest
from tests.detect_helpers import released_and_hit, stream

from looprescue.config import DetectorConfig
from looprescue.detect import scan_text

CHANNELS = ["text", "reasoning"]
# drift's own verdict, where ``rehash`` (the same sentences said again) also cuts the copies
ONLY_DRIFT = DetectorConfig(ignore=("rehash",))
# and where ``paragraph`` (a long paragraph said again word for word) cuts the visible text
BLOCK_DRIFT = DetectorConfig(ignore=("rehash", "paragraph"))


def drifting(template: str, words: list[str], copies: int, seed: int = 1) -> list[str]:
    """``copies`` of a paragraph whose ``{}`` takes a word drawn from ``words``, no two
    copies in a row the same."""
    rng, out, last = random.Random(seed), [], None
    for _ in range(copies):
        word = rng.choice([w for w in words if w != last])
        out.append(template.format(word))
        last = word
    return out


BOTTLE = (
    "Our steel bottle keeps drinks cold for 24 hours and hot for 12. It goes with you to the "
    "gym, the office or a weekend hike, and its {} shape slips into any bag or cup holder."
)
ZH_PROOF = (
    "设x=0.999…，那么10x=9.999…，两式相减得9x=9，所以x=1。这个推导看起来很简单，但关键在于是否真正"
    "理解了“{}”的含义，否则就会觉得0.999…永远差一点点才到1。我再换个角度想一想。"
)


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    ("head", "template", "words", "sep"),
    [
        (
            "Here is the product blurb you asked for.\n\n",
            BOTTLE,
            ["slim", "sleek", "compact", "neat"],
            "\n\n",
        ),
        ("嗯，用户问0.999…是否等于1。\n\n", ZH_PROOF, ["实数", "极限", "数列", "收敛"], "\n\n"),
        ("Blurb:\n", BOTTLE, ["slim", "sleek", "compact", "neat"], "\n"),
    ],
    ids=["en", "zh", "en-newline"],
)
def test_one_paragraph_said_again_with_a_word_changed_is_cut_after_its_first_copy(
    channel, head, template, words, sep
):
    copies = drifting(template, words, 7)
    text = head + sep.join(copies) + sep
    second = len(head) + len(copies[0]) + len(sep)  # the first copy and the gap after it
    for hit in (scan_text(text, channel=channel)[0], stream(text, channel)):
        assert hit.rule == "drift"
        assert hit.loop_start == len(head)
        assert hit.prune_offset == second
    released, hit = released_and_hit(text, channel)
    assert hit is not None and released <= hit.prune_offset + hit.lead_in
    # the second copy begins like the first: it is held back while it is written
    assert released <= second


# worked problems: formula marks in every sentence, the numbers the same each time
WORKED = (
    "The tank holds V = 3 × 4 × 5 = 60 m³ and the pump moves 12 m³/h, so t = 60 / 12 = 5 h. "
    "With the second pump at 8 m³/h the rate is 12 + 8 = 20 m³/h and t = 60 / 20 = 3 h. "
    "So the {} answer is 3 h, and 5 h with one pump."
)
ZH_WORKED = (
    "设本金P=10000元，年利率r=5%，按年复利n=3年，则A=P×(1+r)^n=10000×1.05^3=11576.25元。"
    "利息I=A−P=1576.25元。所以三年后{}是11576.25元。"
)


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    ("template", "words"),
    [(WORKED, ["final", "whole", "right", "full"]), (ZH_WORKED, ["本息合计", "总额", "总共"])],
    ids=["en", "zh"],
)
def test_a_worked_problem_restated_with_a_word_swapped_is_cut(channel, template, words):
    # its formulas are no derivation's lines: it works the problem through in sentences
    copies = drifting(template, words, 6)
    head = "Let me check the numbers.\n\n"
    text = head + "\n\nHmm.\n\n".join(copies) + "\n\n"
    hit = stream(text, channel)
    assert hit is not None and hit.rule == "drift"
    assert hit.loop_start == len(head)


# prose that quotes code in backticks: a tag, an arrow, a call (no code line of its own)
QUOTED = (
    "If `index.js` wraps the app in `<React.StrictMode>`, every effect runs setup → cleanup → "
    "setup in development, so `console.log` prints twice. That is no bug: the fix is to {} the "
    "request in the cleanup with an `AbortController`."
)
ZH_QUOTED = (
    "如果 `index.js` 里用了 `<React.StrictMode>`，开发环境下每个 effect 会执行 setup → cleanup → "
    "setup，所以 `console.log` 会打印两次。这不是 bug，正确的做法是在 cleanup 里用 "
    "`AbortController` {}请求。"
)


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    ("template", "words"),
    [(QUOTED, ["cancel", "abort", "stop"]), (ZH_QUOTED, ["取消", "中止", "终止"])],
    ids=["en", "zh"],
)
def test_prose_that_quotes_code_in_backticks_is_still_prose(channel, template, words):
    # the tag in backticks is named, not written: the paragraph is no line of code
    copies = drifting(template, words, 6)
    head = "Two requests show up in the Network panel.\n\n"
    text = head + "\n\n".join(copies) + "\n\n"
    hit = stream(text, channel, config=ONLY_DRIFT)
    assert hit is not None and hit.rule == "drift"
    assert hit.loop_start == len(head)


SKIP = [
    "Wait, let me look at the removal again.",
    "Removing an item shifts every later item one place to the {}.",
    "The loop's index still moves on by one, so the next item is skipped.",
    "That is why one of the two even numbers is left in the list.",
]
ZH_SKIP = [
    "等等，我再看一下删除这一步。",
    "删掉一个元素以后，后面的元素都会往{}移一位。",
    "可是循环的下标照样加一，所以下一个元素被跳过了。",
    "这就是为什么列表里还剩一个偶数。",
]


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    ("sentences", "words", "sep"),
    [(SKIP, ["left", "front"], " "), (ZH_SKIP, ["前", "左"], "")],
    ids=["en", "zh"],
)
def test_a_paragraph_said_again_with_its_sentences_swapped_is_cut(channel, sentences, words, sep):
    # every other copy says its middle sentences the other way round
    rng = random.Random(3)
    copies = []
    for i in range(6):
        said = [s.format(rng.choice(words)) for s in sentences]
        if i % 2:
            said[1], said[2] = said[2], said[1]
        copies.append(sep.join(said))
    head = "The list ends up as [4, 6, 7].\n\n"
    text = head + "\n\n".join(copies) + "\n\n"
    hit = stream(text, channel, config=ONLY_DRIFT)
    assert hit is not None and hit.rule == "drift"
    assert hit.loop_start == len(head)
    # one paragraph, said again: the first copy is kept, not a block of two
    assert hit.prune_offset == len(head) + len(copies[0]) + 2


@pytest.mark.parametrize("channel", CHANNELS)
def test_answers_that_share_their_frame_but_say_their_own_thing_are_no_drift(channel):
    # support replies: the same greeting and sign-off, each with its own answer in between
    answers = [
        "Your refund was sent back to the card you paid with and shows up within five days.",
        "The charger ships separately from the lamp and comes by courier on Friday morning.",
        "You can change the delivery address in your account until the parcel is packed.",
        "The warranty covers the motor for three years and the battery for one full year.",
        "Gift wrapping is free for every order placed before the middle of December.",
    ]
    text = "Replies:\n\n" + "\n\n".join(
        f"Thanks for writing in. {answer} If anything else comes up, just reply to this email."
        for answer in answers
    )
    assert stream(text, channel) is None


CASES = [
    "Case one: the first guard tells the truth. Then the second guard lies, so the left door "
    "leads out and the right door leads to the cellar. That fits everything we know so far.",
    "Case two: the first guard lies. Then the second guard tells the truth, so the right door "
    "leads out, but he said the left one does, and a truthful guard cannot say that.",
]
CONNECTORS = [
    "So the left door leads out. Hmm, let me check the cases again to be quite sure.",
    "So the left door leads out. Wait, let me go over the cases again to be quite sure.",
    "So the left door leads out. Actually, let me redo the cases again to be quite sure.",
    "So the left door leads out. Hmm, let me look at the cases again to be quite sure.",
]


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_block_whose_closing_line_changes_more_is_still_cut_after_one_block(channel):
    # the cases come back word for word but for a word; the conclusion's second sentence is
    # new each time, more than one word in ten: one loose copy in each block
    rng = random.Random(2)
    words = ["so", "thus", "hence"]
    blocks = [
        "\n\n".join([c.replace("so the", rng.choice(words) + " the", 1) for c in CASES] + [end])
        for end in CONNECTORS
    ]
    head = "Two guards, two doors.\n\n"
    text = head + "\n\n".join(blocks) + "\n\n"
    hit = stream(text, channel)
    assert hit is not None and hit.rule == "drift"
    assert hit.loop_start == len(head)
    assert hit.prune_offset == len(head) + len(blocks[0]) + 2


@pytest.mark.parametrize("channel", CHANNELS)
def test_blocks_whose_every_paragraph_changes_a_quarter_of_its_words_are_no_drift(channel):
    # a schedule: each person's day in two paragraphs under the same opening one, alike in
    # shape, each with its own names and places (one word in four or five)
    people = [
        ("Alice", "bus", "office", "Monday", "novel", "garden"),
        ("Bruno", "train", "school", "Tuesday", "paper", "kitchen"),
        ("Chloe", "tram", "clinic", "Wednesday", "report", "balcony"),
        ("Dmitri", "ferry", "studio", "Thursday", "letter", "library"),
    ]
    text = "The week:\n\n" + "\n\n".join(
        "Here is the next person on the team, set out the same way as the ones before so that "
        "the days are easy to compare.\n\n"
        f"{who} takes the {ride} to the {work} early on {day} and spends the morning there "
        f"with the rest of the team before lunch.\n\n"
        f"In the evening {who} reads a {read} in the {room} for an hour and then goes to bed "
        f"well before midnight."
        for who, ride, work, day, read, room in people
    )
    assert stream(text, channel) is None


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("heading", ["### {}", "**{}**"])
def test_blurbs_under_their_own_headings_are_no_drift(channel, heading):
    body = (
        "Our organic cotton tee is cut for an easy fit and washes well at forty degrees. The "
        "{} shade goes with jeans, chinos and shorts alike, and keeps its colour wash after wash."
    )
    text = "Here are the descriptions.\n\n" + "\n\n".join(
        heading.format(colour) + "\n\n" + body.format(colour.lower())
        for colour in ("Forest Green", "Slate Blue", "Sand", "Coral")
    )
    assert stream(text, channel) is None


# a count worked out again and again, each sentence said one of a few ways each time
VARIANTS = [
    ["Sum 10 comes from (4,6), (5,5) and (6,4), three outcomes.",
     "Sum 10 arises from (4,6), (5,5) and (6,4), that is three outcomes."],
    ["Sum 11 comes from (5,6) and (6,5), two outcomes.",
     "Sum 11 is produced by (5,6) and (6,5), so two outcomes."],
    ["Sum 12 is only (6,6), one outcome.", "Sum 12 is just (6,6), a single outcome."],
    ["So there are six favourable outcomes out of 36 equally likely ones.",
     "Adding them up gives six ways among the 36 equally likely ones."],
    ["The probability is 6/36 = 1/6.", "Hence the probability is 6/36 = 1/6."],
]  # fmt: skip
ZH_VARIANTS = [
    ["先假设笼子里的35只全部都是鸡，那么一共应该有70只脚。",
     "先假设笼子里全都是鸡，那么一共就应该有70只脚才对。"],
    ["可是题目里实际有94只脚，比我们假设的多出了24只脚。",
     "可是题目里实际有94只脚，和假设相比一共相差24只脚。"],
    ["每把其中一只鸡换成一只兔子，总的脚数就会增加2只。",
     "每把其中一只鸡替换成一只兔子，脚的总数就多出2只。"],
    ["所以兔子一共有12只，剩下的鸡一共有23只，验证无误。",
     "因此可以得出兔子有12只，鸡有23只，代回去验证也对。"],
]  # fmt: skip


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    ("variants", "sep", "between"),
    [(VARIANTS, " ", "Hmm, let me recount."), (ZH_VARIANTS, "", "嗯，再算一遍。")],
    ids=["en", "zh"],
)
def test_a_paragraph_said_again_in_other_words_of_its_own_is_cut(channel, variants, sep, between):
    # no two copies alike, each a quarter of its words or more apart from the one before,
    # but nothing new said after the first few: loose copies of one paragraph
    rng = random.Random(4)
    copies = [sep.join(rng.choice(v) for v in variants) for _ in range(12)]
    head = "Work it out.\n\n"
    gap = f"\n\n{between}\n\n"
    text = head + gap.join(copies) + "\n\n"
    hit = stream(text, channel, config=ONLY_DRIFT)
    assert hit is not None and hit.rule == "drift"
    # cut within the first few copies, at a copy's end
    ends = [len(head) + len(gap.join(copies[: i + 1])) for i in range(len(copies))]
    assert any(end <= hit.prune_offset <= end + len(gap) for end in ends[:5])


PLAN = [
    "Day one should be the old town: start early at the castle before the crowds, walk down "
    "the {} lanes to the cathedral, and end the evening at the river market.",
    "Day two is the museum quarter in the morning, the {} gallery first, then lunch in the "
    "park and the botanical garden in the afternoon, which sits close by.",
    "Day three starts with the {} hike to the lookout, then back to the centre for the food "
    "hall at lunch and the harbour in the afternoon. That covers the highlights.",
]


def _hanoi(line: str, discs: int = 4) -> str:
    """Every move of a tower of ``discs``, one line each in the form of ``line`` (the step, the
    disc, from, to, then the three pegs bottom to top): a procedure's steps say the same few
    words again and again, their values changed."""
    pegs: dict[str, list[int]] = {"A": list(range(discs, 0, -1)), "B": [], "C": []}
    moves: list[tuple[int, str, str]] = []

    def move(n: int, source: str, target: str, spare: str) -> None:
        if n:
            move(n - 1, source, spare, target)
            moves.append((n, source, target))
            move(n - 1, spare, target, source)

    move(discs, "A", "C", "B")
    lines = []
    for step, (disc, source, target) in enumerate(moves, 1):
        pegs[target].append(pegs[source].pop())
        lines.append(line.format(step, disc, source, target, pegs["A"], pegs["B"], pegs["C"]))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_block_of_paragraphs_derived_again_with_a_word_swapped_is_cut_after_one_block(channel):
    rng = random.Random(5)
    blocks = [
        "\n\n".join(p.format(rng.choice(["narrow", "quiet", "old", "steep"])) for p in PLAN)
        for _ in range(4)
    ]
    head = "Let me plan the three days.\n\n"
    text = head + "\n\nLet me go over it again.\n\n".join(blocks) + "\n\n"
    hit = stream(text, channel)
    assert hit is not None and hit.rule == "drift"
    assert hit.loop_start == len(head)
    # the first block is kept, its last line's break too; the line between copies is not
    assert hit.prune_offset == len(head) + len(blocks[0]) + 1


CASE = (
    "{label} A {a}, B {b}, C {c}. A says that B is a knave, which is {truth}, so A's claim "
    "{fits} what a {a} may say. {verdict}"
)


def cases(label: str) -> list[str]:
    """Eight cases checked one after another in the same words, each a word or two apart."""
    out = []
    for n, (a, b, c) in enumerate(itertools.product(["knight", "knave"], repeat=3), start=1):
        truth = "true" if b == "knave" else "false"
        fits = "fits" if (truth == "true") == (a == "knight") else "does not fit"
        verdict = "Consistent so far." if fits == "fits" else "Contradiction."
        out.append(
            CASE.format(
                label=label.format(n), a=a, b=b, c=c, truth=truth, fits=fits, verdict=verdict
            )
        )
    return out


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("label", ["Case {}:", "{}.", "**Case {}**:"])
def test_cases_checked_one_after_another_under_counting_labels_are_no_drift(channel, label):
    # each case swaps a word in the same sentences; its label counts on: an enumeration of
    # cases, which only the request bounds
    text = "Check all eight assignments.\n\n" + "\n".join(cases(label)) + "\n"
    assert scan_text(text, channel, config=ONLY_DRIFT) == []
    # the same paragraphs under one label said again are copies
    again = "Check all eight assignments.\n\n" + "\n".join(cases("Case 1:") * 3) + "\n"
    assert scan_text(again, channel, config=ONLY_DRIFT) != []


DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
ZH_DAYS = ["星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日"]


def knights_under_headers() -> str:
    """Eight cases, each under a short line of its own that names it; the paragraphs under
    two cases that share A and B are the same word for word."""
    out = ["Eight cases; stop each at the first contradiction.\n"]
    for n, (a, b, c) in enumerate(itertools.product(["knight", "knave"], repeat=3), start=1):
        truth = "true" if b == "knave" else "false"
        fits = "fits" if (truth == "true") == (a == "knight") else "does not fit"
        out.append(f"Case {n}: A {a}, B {b}, C {c}.")
        out.append(
            f'- A ({a}) says "B is a knave". B is a {b} here, so "B is a knave" is {truth}. '
            f"A {a} needs it {'true' if a == 'knight' else 'false'}, so the claim {fits}.\n"
        )
    return "\n".join(out)


def weekdays_under_headers() -> str:
    out = ["Check each day in turn.\n"]
    for today, yesterday in zip(DAYS[1:] + DAYS[:1], DAYS, strict=True):
        out.append(f"{today}: yesterday was {yesterday}.")
        out.append(
            f"- Lion: {today} is a truth-telling day for the Lion, so his statement must be "
            f"true. Was {yesterday} one of the Lion's lying days? No. So the statement is "
            "false, and that contradicts what he must say.\n"
        )
    return "\n".join(out)


def zh_weekdays_labelled() -> str:
    lines = ["把7种情况逐一算一遍。\n"]
    for i, day in enumerate(ZH_DAYS):
        three = "、".join(ZH_DAYS[(i + k) % 7] for k in range(3))
        lines.append(
            f"1号是{day}：1、2、3号分别是{three}，这三天各出现5次。星期日出现4次，"
            "星期三出现5次，不相等，排除。"
        )
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    "make", [knights_under_headers, weekdays_under_headers, zh_weekdays_labelled]
)
def test_cases_each_named_by_a_label_of_its_own_are_no_drift(channel, make):
    # a case split names each case on a short line over it (``Case 3: A knight, B knave.``,
    # ``Friday: yesterday was Thursday.``) or in its line's own label (``1号是星期二：``):
    # the same words under a new name are the next case, not a copy
    assert scan_text(make(), channel, config=ONLY_DRIFT) == []


@pytest.mark.parametrize("channel", CHANNELS)
def test_copies_after_connectors_that_never_come_back_are_a_loop(channel):
    # a connector over each copy (``Let me re-plan.``) names nothing, even when each is new
    copies = drifting(BOTTLE, ["slim", "sleek", "compact", "neat"], 9)
    connectors = ["Let me re-plan this.", "Hmm, let me reorganize.", "Wait, one more pass.",
                  "Let me restructure it.", "Okay, again.", "Let me tidy this up.",
                  "One more time.", "Let me redo the order."]  # fmt: skip
    head = "Here is the blurb.\n\n"
    text = head + copies[0] + "\n\n"
    for connector, copy in zip(connectors, copies[1:], strict=True):
        text += f"{connector}\n\n{copy}\n\n"
    hit = stream(text, channel)
    assert hit is not None and hit.rule == "drift" and hit.loop_start == len(head)


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    "labels",
    [["In short:", "Once again:", "To sum up:"], ["总结一下：", "简单来说：", "也就是说："]],
    ids=["en", "zh"],
)
def test_copies_under_labels_that_come_back_are_a_loop(channel, labels):
    # a recap line over every copy, the recaps taking turns: no label names an item once
    # one comes back
    copies = drifting(BOTTLE, ["slim", "sleek", "compact", "neat"], 9)
    head = "Here is the blurb.\n\n"
    text = head + copies[0] + "\n\n"
    for i, copy in enumerate(copies[1:]):
        text += f"{labels[i % len(labels)]}\n\n{copy}\n\n"
    hit = stream(text, channel)
    assert hit is not None and hit.rule == "drift"
    assert hit.loop_start == len(head)
    # the first copy is kept; the recap over the second is cut with it, or kept (a label)
    kept = text[hit.loop_start + len(copies[0]) : hit.prune_offset]
    assert kept.strip() in ("", labels[0])
    released, hit = released_and_hit(text, channel)
    assert hit is not None and released <= hit.prune_offset + hit.lead_in


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    "text",
    [
        # parallel cases: the same sentence with other numbers says something new each time
        "Try the cases.\n\n"
        + "\n\n".join(
            f"Take {n} as the number of odd terms: their sum is a perfect square again, so "
            "the claim holds for this case as well and we move on to the next one."
            for n in range(1, 9)
        ),
        # a list whose items change only their label
        "The plan:\n\n"
        + "\n".join(
            f"{day}: a thirty minute walk in the morning, a light lunch, and an early night "
            "with no screens after nine in the evening."
            for day in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
        ),
        # a derivation: each line the last with one term changed
        "所以：\n\n"
        + "\n".join(
            f"由上式可知P等于(2-2w^k+w^{{2k}})乘以(a+b+{t})，化简得(2-w^k)乘以(a+b+{t})加c^2+d^2"
            for t in ("c", "c", "d", "d", "e")
        ),
        # prose quoted in a fence: a template filled in for each recipient
        "```text\n"
        + "\n\n".join(
            f"Dear {name}, thank you for your order of the steel bottle. It ships from our "
            "warehouse this week, and the tracking number follows in a separate email."
            for name in ("Ann", "Bob", "Cem", "Dee", "Eve")
        )
        + "\n```\n",
        # letters with one body, each under its own salutation
        "\n\n".join(
            f"Dear {name},\n\nThank you for your order of the {item} bottle. It ships from our "
            "warehouse this week, and the tracking number follows in a separate email."
            for name, item in zip(
                ("Ann", "Bob", "Cem", "Dee", "Eve"),
                ("steel", "glass", "steel", "glass", "steel"),
                strict=True,
            )
        ),
        # one paragraph restated once, then the answer goes on
        BOTTLE.format("slim")
        + "\n\n"
        + BOTTLE.format("sleek")
        + "\n\nIt comes in four colours and ships in two days. Returns are free for a month "
        "after delivery, and the lid is covered by a lifetime warranty against leaks.\n",
        # code in a fence: tests that differ in one value
        "```python\n"
        + "\n\n".join(
            f"def test_parse_{name}():\n    assert parse_value('{name}', strict=True, "
            f"default=None, encoding='utf-8') == expected_value('{name}', strict=True)"
            for name in ("alpha", "beta", "gamma", "delta", "omega")
        )
        + "\n```\n",
        # a counting song: each verse the last with its number, in words, one less
        "\n".join(
            f"第{n}只小纸船顺着弯弯的小河慢慢地漂向很远很远的地方，岸边的孩子们一直在拍手。"
            for n in "七六五四三二一"
        ),
        "\n".join(
            f"{n} little paper boats went sailing down the silver stream this morning, and the "
            "children on the bank kept clapping as they went."
            for n in ("Seven", "Six", "Five", "Four", "Three", "Two")
        ),
        # the steps of a procedure: the same words, values moved (each line four edits from
        # the one before, and no new word in it)
        "用户要4层汉诺塔的每一步。\n\n"
        + _hanoi("第{}步：把{}号盘从{}移到{}。状态：A={}  B={}  C={}"),
        "Every move of the tower, with the pegs after it.\n\n"
        + _hanoi("Step {}: move disc {} from peg {} to peg {}. The pegs hold A={}, B={}, C={}."),
    ],
    ids=[
        "cases",
        "labels",
        "derivation",
        "fenced-letters",
        "letters",
        "restated-once",
        "fenced-tests",
        "counting-song-zh",
        "counting-song-en",
        "procedure-zh",
        "procedure-en",
    ],
)
def test_paragraphs_alike_for_a_reason_are_no_drift(channel, text):
    assert stream(text, channel) is None
    assert scan_text(text, channel=channel) == []


@pytest.mark.parametrize("channel", CHANNELS)
def test_copies_all_the_same_are_left_to_the_periodic_rules(channel):
    text = "Blurb:\n\n" + (BOTTLE.format("slim") + "\n\n") * 6
    hit = stream(text, channel)
    assert hit is not None and hit.rule != "drift"


# A reasoning block said again whole: its working lines are formulas, said word for word, and
# one line of prose is said another way each time.
GAP_METHOD = [
    "The letters other than S are M, I, I, I, I, P and P: seven of them, so they can be lined "
    "up in 7! / (4! · 2!) = 5040 / 48 = 105 ways.",
    "With 7 letters in a row there are 8 gaps: one before the first letter, one after the "
    "last, and 6 between them: _ X _ X _ X _ X _ X _ X _ X _.",
    "The 4 S's go into 4 different gaps out of 8, and they are alike, so C(8, 4) = 70 ways.",
    "So the count is 105 × 70 = 7350.",
    "Of all 11! / (4! · 4! · 2!) = 34650 arrangements of the letters, that is about one in "
    "five, which seems plausible.",
    "{} Each choice of gaps gives one word, and each word with no two S's together comes from "
    "one choice of gaps, so nothing is counted twice.",
    "Does the problem ask only about the S's? It says no two S's are adjacent, so yes.",
    "Let me go through the whole computation once more from the very start, to make sure "
    "that no step of it has gone wrong.",
]
CHECKS = [
    "Let me double-check by another method.",
    "Let me verify this a second way.",
    "Let me check that from another angle.",
]
# A diagnosis said again whole with one number changed in one paragraph each time.
ZH_DIAGNOSIS = [
    "第一，内存上限只有 256Mi，Spring Boot 应用启动时堆和元空间加起来很容易超过这个值，"
    "如果没有设置最大堆比例，容器很可能会被系统杀掉。",
    "第二，存活探针的初始延迟太短，应用启动一般要十几秒到几十秒，探针太早开始探测就会连续失败，"
    "然后容器被重启，看起来就是反复崩溃。",
    "排查步骤是先查看 Pod 的事件和上一次的状态，再看上一次崩溃前的日志，注意一定要看上一次的，"
    "不然看到的是刚启动的容器，什么都还没有。",
    "针对探针的问题，建议加一个启动探针，或者把存活探针的初始延迟调到 {} 秒左右，"
    "这样应用有足够的时间完成启动和预热。",
    "嗯，这几个点应该差不多覆盖了。那我再整体过一遍思路，确保回答的顺序合理，没有遗漏的地方。",
]


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_block_of_working_lines_said_again_whole_is_a_loop(channel):
    # the formula lines are no prose, but said word for word they are no step of a derivation
    lead = "We count the words from MISSISSIPPI with no two S's next to each other.\n\n"
    copies = ["\n\n".join(GAP_METHOD).format(check) + "\n\n" for check in CHECKS]
    text = lead + "".join(copies)
    hit = stream(text, channel, sizes=(5,), config=BLOCK_DRIFT)
    assert hit is not None and hit.rule == "drift"
    assert hit.prune_offset == len(lead) + len(copies[0])


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_block_said_again_with_one_number_changed_is_a_loop(channel):
    lead = "用户的 Pod 一直处于 CrashLoopBackOff 状态，我来分析一下原因。\n\n"
    copies = ["\n\n".join(ZH_DIAGNOSIS).format(n) + "\n\n" for n in (60, 45, 90, 30)]
    text = lead + "".join(copies)
    hit = stream(text, channel, sizes=(3, 7), config=BLOCK_DRIFT)
    assert hit is not None and hit.rule == "drift"
    assert hit.prune_offset == len(lead) + len(copies[0])
    assert hit.fired_at <= len(lead) + sum(map(len, copies[:3]))
