"""Rule reprise: line after line is one the text already said, drawn back in any order."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from tests.detect_helpers import released_and_hit, stream

from looprescue.config import DetectorConfig
from looprescue.detect import scan_text
from looprescue.detect.channel import ChannelDetector

CHANNELS = ["text", "reasoning"]
LEAD = (
    "A car moving at 90 km/h brakes with a deceleration of 5 m/s². How far does it travel "
    "before it stops, and how long does that take? First convert the speed to m/s.\n\n"
)

EN_GROUPS = [
    ["Using v² = u² + 2as with v = 0, u = 25 m/s, a = −5 m/s²:", "0 = 625 − 10s, so s = 62.5 m"],
    ["For the time, v = u + at: 0 = 25 − 5t, so t = 5 s"],
    ["Check with s = ut + ½at² = 125 − 62.5 = 62.5 m ✓", "Average speed 12.5 m/s × 5 s = 62.5 m"],
]
EN_ENDS = ["Stopping distance 62.5 m, stopping time 5 s.", "So the car stops in 62.5 m after 5 s."]
EN_CONNECTORS = ["Let me redo it.", "Hmm, let me recompute that.", "Wait, once more."]
ZH_GROUPS = [
    ["由 v² = u² + 2as，代入 v = 0，u = 25 m/s，a = −5 m/s²：", "0 = 625 − 10s，所以 s = 62.5 m"],
    ["再求时间：v = u + at，0 = 25 − 5t，所以 t = 5 s"],
    ["验证：s = ut + ½at² = 125 − 62.5 = 62.5 m ✓", "平均速度 12.5 m/s × 5 s = 62.5 m"],
]
ZH_ENDS = ["所以刹车距离是62.5米，用时5秒。", "答案：滑行62.5米，需要5秒。"]
ZH_CONNECTORS = ["等等，再算一遍。", "我再重新整理一下。", "再验证一次这个结果。"]


def reworked(groups, ends, connectors, copies, seed=0):
    """A derivation said again and again: its groups of lines in an order that changes from
    copy to copy, its last line one of two, a connector line between copies. Returns the text,
    where the first copy ends and where the second copy's own lines begin."""
    rng = random.Random(seed)
    order = list(range(len(groups)))
    out, first_end, second = [], 0, 0
    for n in range(copies):
        if n:
            previous = order[:]
            while order == previous:
                rng.shuffle(order)
            out.append("\n" + rng.choice(connectors) + "\n")
        lines = [line for k in order for line in groups[k]] + [ends[n % 2 if n else 0]]
        out.append("\n".join(lines) + "\n")
        if n == 0:
            first_end = len(LEAD) + len("".join(out))
        if n == 1:
            second = len(LEAD) + len("".join(out)) - len(out[-1])
    return LEAD + "".join(out), first_end, second


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    ("groups", "ends", "connectors"),
    [(EN_GROUPS, EN_ENDS, EN_CONNECTORS), (ZH_GROUPS, ZH_ENDS, ZH_CONNECTORS)],
    ids=["en", "zh"],
)
def test_a_derivation_said_again_in_a_new_order_is_cut_after_its_first_copy(
    channel, groups, ends, connectors
):
    text, first_end, second = reworked(groups, ends, connectors, 8)
    whole = scan_text(text, channel=channel)
    assert whole and whole[0].rule == "reprise"
    hit = whole[0]
    # one copy kept, with the connector that opened the second at most
    assert first_end <= hit.prune_offset <= second
    assert text[first_end:second].strip() in {c for c in connectors}
    # by the fourth copy
    assert hit.fired_at < len(LEAD) + 4 * (second - len(LEAD))
    for sizes in ((1,), (3, 7), (64,)):
        assert stream(text, channel, sizes=sizes) == hit
    released, streamed = released_and_hit(text, channel)
    # the same cut; what went out past it is the streamed hit's lead-in
    assert streamed is not None and replace(streamed, lead_in=0) == hit
    assert released <= streamed.prune_offset + streamed.lead_in


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    ("groups", "ends", "connectors"),
    [(EN_GROUPS, EN_ENDS, EN_CONNECTORS), (ZH_GROUPS, ZH_ENDS, ZH_CONNECTORS)],
    ids=["en", "zh"],
)
def test_a_derivation_redone_in_its_own_order_is_cut(channel, groups, ends, connectors):
    # its lines are formulas, not a chorus: the order never changes, the connector and the
    # last line do
    rng = random.Random(5)
    lines = [line for group in groups for line in group]
    copies = ["\n".join([*lines, rng.choice(ends)]) + "\n" for _ in range(7)]
    between = ["\n" + rng.choice(connectors) + "\n" for _ in copies]
    text = LEAD + "".join(c + b for c, b in zip(copies, between, strict=True))
    hit = stream(text, channel, sizes=(3,))
    assert hit is not None and hit.rule == "reprise", hit
    # one copy kept, the cut within the connector that opened the second
    first_end = len(LEAD) + len(copies[0])
    assert first_end <= hit.prune_offset <= first_end + len(between[0])
    assert hit.fired_at < len(LEAD) + 4 * (len(copies[0]) + len(between[0]))


TOOL_CALL = (
    '<tool_call>\n{"name": "read_file", "arguments": {"path": "config/settings.py"}}\n'
    "</tool_call>\n<tool_response>\nDATABASES = {\n"
    '    "default": {\n        "ENGINE": "django.db.backends.postgresql",\n'
    '        "HOST": os.environ.get("DB_HOST", "localhost"),\n'
    '        "PORT": os.environ.get("DB_PORT", "5432"),\n    }\n}\n</tool_response>\n'
)
REMARKS = [
    "HOST defaults to localhost. Let me read config/settings.py again to check the names.",
    "好的，我看到了配置。接下来我需要查看 settings.py 里的数据库设置。",
]


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_tool_call_written_out_again_and_again_is_cut(channel):
    # an agent whose tool calls come out as text: the call and its answer, line for line in
    # their own order, a remark between that changes
    rng = random.Random(2)
    text = LEAD + TOOL_CALL + "".join(rng.choice(REMARKS) + "\n\n" + TOOL_CALL for _ in range(6))
    hit = stream(text, channel, sizes=(3,))
    assert hit is not None and hit.rule == "reprise", hit
    # one copy kept, cut where the second begins: with its opening tag, too short to count
    # but said before the same line last time too
    second = text.index(TOOL_CALL, len(LEAD) + 1)
    assert hit.prune_offset == second


RUN = (
    "Running the tests again.\n\n$ python -m pytest tests/test_parser.py -x -q\n"
    "ImportError while importing test module '/repo/tests/test_parser.py'.\n"
    "Hint: make sure your test modules/packages have valid Python names.\nTraceback:\n"
    "tests/test_parser.py:3: in <module>\n    from parser.tokenizer import Tokenizer\n"
    "E   ModuleNotFoundError: No module named 'parser.tokenizer'\n1 error in 0.{}s\n\n"
)
RUN_REMARKS = [
    "The import still fails. Let me try running the tests once more.",
    "Same error. I'll re-run the tests to make sure.",
    "还是同样的导入错误，我再运行一次测试看看。",
]


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_command_and_its_output_written_out_again_and_again_are_cut(channel):
    # an agent that re-runs a failing command in its reasoning, no fence: the command and its
    # output line for line in their own order, the timing and the remark between changing
    rng = random.Random(5)
    copies = [RUN.format(rng.randint(8, 14)) for _ in range(7)]
    between = [rng.choice(RUN_REMARKS) + "\n\n" for _ in copies]
    text = LEAD + "".join(c + b for c, b in zip(copies, between, strict=True))
    hit = stream(text, channel, sizes=(3, 7))
    assert hit is not None and hit.rule == "reprise", hit
    first_end = len(LEAD) + len(copies[0])
    assert (
        first_end
        <= hit.prune_offset
        <= first_end + len(between[0]) + len("Running the tests again.\n\n")
    )
    assert hit.fired_at < len(LEAD) + 4 * (len(copies[0]) + len(between[0]))


def _song(finale: int) -> str:
    chorus = (
        "Row, row, row your boat along\nGently down the silver stream\n"
        "Merrily, merrily, merrily on\nLife is but a waking dream\n"
    )
    verses = [
        "The morning light is on the bay\nThe gulls are calling out my name\n",
        "I packed my bags and left the town\nThe river never looks the same\n",
    ]
    bridge = "And when the water turns to gold\nWe'll still be singing, still be bold\n"
    body = "\n".join([verses[0], chorus, verses[1], chorus, bridge, *[chorus] * finale])
    return "**River Song**\n\n" + body


def _letters() -> str:
    body = (
        "I wanted to let you know that our Q3 vendor review has moved to Thursday.\n"
        "The time stays the same, and we will meet in the fourth-floor room.\n"
        "Please bring the updated price list and the delivery schedule.\n"
        "Sorry for the change, and thank you for your flexibility.\n"
        "Best regards, Procurement\n"
    )
    names = ["Ann", "Bob", "Cleo", "Dev", "Eli", "Fay"]
    return "Here are the emails.\n\n" + "---\n".join(f"Hi {n},\n{body}" for n in names)


def _revisits() -> str:
    # each part goes back to the same two formula lines, then works its own numbers
    parts = []
    for k, (u, a) in enumerate([(20, 4), (30, 5), (25, 2), (16, 8), (40, 6)], 1):
        parts.append(
            f"Part {k}: u = {u} m/s, a = {a} m/s², and the car comes to rest\n"
            "From v² = u² + 2as we get\nso s = (v² − u²) / (2a)\n"
            f"Substituting, s = {u * u} / {2 * a} = {u * u / (2 * a)} m\n"
        )
    return "\n".join(parts)


def _passage_said_again() -> str:
    # a reasoning trace that goes back over a passage once, with one formula it keeps at
    passage = [
        "From abc = 23, c = 23/(ab)",
        "ab + b*(23/(ab)) + a*(23/(ab)) = 27",
        "ab + 23/a + 23/b = 27",
        "Now, let me solve for b in terms of a.",
        "This seems complicated, but maybe it is a quadratic in b.",
        "Let me rearrange:",
        "ab + 23/a + 23/b = 27",
        "Multiply both sides by ab to clear the denominators:",
    ]
    lines = ["Perhaps I can express b and c in terms of a.", *passage]
    lines += ["Wait, let's rearrange properly.", *passage, "Wait, let's rearrange properly."]
    lines += ["a²b² − 27ab + 23a + 23b = 0", "This is a quadratic in b, so let me use the formula."]
    return "\n".join(lines) + "\n"


def _fixing() -> str:
    # an agent fixing one failure after another: the same command and the same lines of the
    # run's header each time, but a new failure and an edit between the runs
    failures = [
        ("test_parse_empty", "AssertionError: assert [] == [Token(EOF)]", "tokens.append(EOF)"),
        ("test_parse_number", "ValueError: invalid literal for int()", "value = float(text)"),
        ("test_parse_string", "KeyError: 'quote'", "quote = spec.get('quote', '\"')"),
        ("test_parse_nested", "RecursionError: maximum depth exceeded", "depth += 1"),
        ("test_parse_unicode", "UnicodeDecodeError: 'ascii' codec", "data.decode('utf-8')"),
    ]
    runs = []
    for name, error, edit in failures:
        runs.append(
            "$ python -m pytest tests/test_parser.py -x -q\n"
            "collected 24 items from tests/test_parser.py\n"
            f"FAILED tests/test_parser.py::{name} - {error}\n"
            f"tests/test_parser.py:{len(name)}: in {name}\n1 failed, 23 passed in 0.41s\n"
            f"Editing parser/core.py so that {name[5:]} passes:\n    {edit}\n"
        )
    return "\n".join(runs)


def _readings() -> str:
    rng = random.Random(3)
    return "".join(f"GPU 0: utilisation {rng.randint(0, 9)}%, memory normal\n" for _ in range(60))


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize(
    "text",
    [
        _song(3),  # a chorus sung three times to end a song: in its own order each time
        _letters(),  # one letter to six people: in its own order each time
        _revisits(),  # two formula lines said again in every part, around new lines
        _passage_said_again(),  # a passage said once again, a formula said six times
        _readings(),  # a log's readings: one line with a few numbers
        _fixing(),  # a command run again after each fix, its failure new each time
        # lines as short as a derivation's results, said again and again
        "".join(f"s = {n % 3}.5 m.\nt = {n % 4} s.\n" for n in range(80)),
    ],
    ids=["song", "letters", "revisits", "passage", "readings", "fixing", "short"],
)
def test_lines_said_again_for_a_reason_are_no_reprise(channel, text):
    assert all(hit.rule != "reprise" for hit in scan_text(LEAD + text, channel=channel))


@pytest.mark.parametrize("channel", CHANNELS)
def test_code_and_tables_between_copies_end_the_run(channel):
    # a copy of the derivation, then the same lines each inside a code fence: code says its
    # lines again as it is written
    text, _, _ = reworked(EN_GROUPS, EN_ENDS, EN_CONNECTORS, 2)
    fenced = "".join(f"```\n{line}\n```\n" for line in text[len(LEAD) :].splitlines() * 4)
    assert all(hit.rule != "reprise" for hit in scan_text(text + fenced, channel=channel))
    rows = "".join(f"| {line} |\n" for line in text[len(LEAD) :].splitlines() if line) * 4
    assert all(hit.rule != "reprise" for hit in scan_text(text + rows, channel=channel))


def test_nothing_is_held_back_while_lines_come_back():
    # a healthy trace that goes back to its formulas goes out as it comes: the rule takes no
    # part in the watermark, and the channel counts what went out past the cut as lead-in
    detector = ChannelDetector("reasoning", DetectorConfig())
    assert detector.rule("reprise") not in detector._holding_rules
    text, _, _ = reworked(EN_GROUPS, EN_ENDS, EN_CONNECTORS, 8)
    assert scan_text(text, channel="reasoning")[0].lead_in == 0  # (nothing was released)
    released, hit = released_and_hit(text, "reasoning")
    assert hit is not None and hit.rule == "reprise"
    assert released > hit.prune_offset  # the copies went out as they came
    assert hit.prune_offset + hit.lead_in == released
