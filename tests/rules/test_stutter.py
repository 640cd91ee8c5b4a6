"""Rule stutter: one clause said again and again inside a sentence (and cycle's count of it)."""

from __future__ import annotations

import pytest
from tests.detect_helpers import stream

from looprescue.config import DetectorConfig
from looprescue.detect import StreamDetector, scan_text
from looprescue.detect.rules.stutter import StutterRule

TIMETABLE = (
    "在这个表格中，我们可以使用一个表格，用于表示一个系统，用于表示一个系统，用于表示一个系统，"
    "用于表示一个系统。\n\n在这个表格中，我们可以使用一个表格，用于表示一个系统，用于表示一个系统。\n\n"
)
TEXT_AFTER = "课程表如下：周一上午是数学和语文，下午是英语和体育。周二上午是物理，下午是化学。\n"


def released_before(text: str, step: int = 3):
    """Stream ``text`` as a proxy does (safe_offset after every delta): the hit, and the most
    the watermark let out before it."""
    detector, released = StreamDetector(), 0
    for pos in range(0, len(text), step):
        hit = detector.feed("text", text[pos : pos + step])
        if hit is not None:
            return hit, released
        released = max(released, detector.safe_offset("text"))
    return detector.flush("text"), released


def test_a_clause_said_three_times_in_a_sentence_is_cut_after_its_first_copy():
    hit, released = released_before(TIMETABLE + TEXT_AFTER)
    first = TIMETABLE.index("用于表示一个系统")
    assert hit is not None and hit.rule == "stutter"
    assert hit.loop_start == first
    assert hit.prune_offset == first + len("用于表示一个系统，")  # one copy kept
    # found when its sentence ends, and nothing after the kept copy was let out before
    assert hit.fired_at <= TIMETABLE.index("。") + 1
    assert released <= hit.prune_offset


@pytest.mark.parametrize("sizes", [(1,), (2, 7), (5,), (64,)])
def test_any_chunking_gives_the_same_cut(sizes):
    hit = stream(TIMETABLE + TEXT_AFTER, "text", sizes=sizes)
    assert (hit.rule, hit.prune_offset) == ("stutter", TIMETABLE.index("用于表示一个系统") + 9)


def test_an_english_clause_stutter_fires_and_a_clause_said_twice_does_not():
    clause = "we can use the table to show the system, "
    stutter = "In this table " + clause * 3 + "and then the week ends.\n"
    hit = scan_text(stutter, "text")[0]
    # a clause this long reaches cycle's probes as well: either rule keeps one whole copy
    assert hit.rule in ("stutter", "cycle")
    assert stutter[: hit.prune_offset].rstrip() == "In this table " + clause.rstrip()
    twice = "In this table " + clause * 2 + "and then the week ends.\n"
    assert scan_text(twice + "It was a long week, and a good one.\n", "text") == []


@pytest.mark.parametrize(
    "text",
    [
        "No, no, no, no, that is not what I meant at all.\n",  # a short cry
        "It was very, very, very, very cold that morning on the hill.\n",  # one word
        "加油，加油，加油，加油！我们一定能赢得这场比赛。\n",  # a cheer of two chars
        "Location, location, location, as every estate agent says.\n",  # one word
        "Knock knock, knock knock, who is there at this hour of night?\n",  # two short words
    ],
)
def test_emphasis_is_not_a_stutter(text):
    assert scan_text(text, "text") == []


def test_code_lists_and_tables_are_not_prose():
    fenced = "```js\nconst flags = [false, false, false, false, false, false];\n```\n"
    listed = "".join(f"- item: value one, value one, value one, value one {n}\n" for n in range(2))
    table = "| 周一 | 数学课，数学课，数学课 |\n| 周二 | 语文 |\n"
    for text in (fenced, listed, table):
        assert [h.rule for h in scan_text(text, "text")] != ["stutter"], text


def test_cycle_counts_a_stuttered_clause_at_cycleClauseRepeats_copies():
    # a run long enough for cycle's probes, in a sentence that does not end: cycle finds it
    clause = "用于表示一个系统，"
    text = (
        "在这个表格中，"
        + clause * 5
        + "".join(chr(0x4E00 + 37 * i) for i in range(120))  # no sentence end yet
    )
    hit = stream(text, "text")
    assert hit is not None and hit.rule == "cycle"
    assert hit.prune_offset == len("在这个表格中，") + len(clause)
    # with the clause threshold raised to the short-unit one, five copies are nothing
    strict = DetectorConfig(cycleClauseRepeats=10)
    assert stream(text, "text", config=strict) is None


def test_cycleClauseRepeats_sets_the_stutter_rule_too():
    sentence = "In this table " + "we can use the table to show the system, " * 3 + "and so on."
    assert (
        StutterRule("text", DetectorConfig(cycleClauseRepeats=4)).on_clauses(sentence, 0, 90)
        is None
    )
    hit = StutterRule("text", DetectorConfig()).on_clauses(sentence, 100, 190)
    assert (hit.rule, hit.loop_start, hit.prune_offset) == ("stutter", 114, 155)


def test_a_stutter_inside_a_sentence_too_long_for_a_phrase_is_still_judged():
    # the pool judges sentences up to a phrase's length; a stutter can sit in a longer one
    opening = (
        "这个问题可以从很多角度来看，" + "".join(chr(0x4E00 + 53 * i) for i in range(260)) + "，"
    )
    text = opening + "用于表示一个系统，" * 3 + "最后总结一下。\n" + TEXT_AFTER
    hit, released = released_before(text)
    assert (hit.rule, hit.loop_start) == ("stutter", len(opening))
    assert released <= hit.prune_offset


def test_a_delta_that_ends_the_third_copy_and_breaks_the_run_leaks_nothing():
    # Found by a stress run: the run of three clauses broke inside the delta that completed its
    # third copy, so the watermark never saw three copies recur and let the run out before
    # the checkpoint that cut it.
    text = (
        "we can use the table，we can use the table，we can use the tablevery well then；very well"
        " then；very well then；用于表示一个系统\n表格，"
        "用于表示一个系统，用于表示一个系统，用于表示一个系统，no，no，no，no，"
    )
    detector, released, pos, i, hit = StreamDetector(watch="both"), 0, 0, 0, None
    while hit is None and pos < len(text):
        piece = text[pos : pos + (10, 3)[i % 2]]
        pos, i = pos + len(piece), i + 1
        hit = detector.feed("reasoning", piece)
        if hit is None:
            released = detector.safe_offset("reasoning")
    hit = hit or detector.flush("reasoning")
    assert hit is not None
    assert released <= hit.prune_offset + hit.lead_in


# SmolLM2's answer to 什么是光合作用？: a list of one name that runs on inside one sentence
PHOTOSYNTHESIS = (
    "光合作用是一种编界的生命空氣，它是一种编界的生命空氣，它可以福制地挖掖空氣，使光花灭火灯、"
    + "灯烛、" * 32
    + "灯烛！\n"
)


@pytest.mark.parametrize("sizes", [(1,), (2, 7), (3,), (5,), (64,), (500,)])
def test_a_short_clause_said_ten_times_is_cut_before_its_sentence_ends(sizes):
    first = PHOTOSYNTHESIS.index("灯烛")
    hit = stream(PHOTOSYNTHESIS, "text", sizes=sizes)
    assert (hit.rule, hit.loop_start, hit.prune_offset) == ("stutter", first, first + 3)
    # at the mark after the tenth copy, in any chunking (not at a checkpoint, 128 chars in)
    assert hit.fired_at == first + 10 * len("灯烛、")
    _, released = released_before(PHOTOSYNTHESIS)
    assert released <= hit.prune_offset


@pytest.mark.parametrize(
    "text",
    [
        "The array is 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 when it starts.\n",  # no letter
        "灯烛、" * 9 + "灯笼。\n",  # nine copies
        "- 灯烛、" + "灯烛、" * 12 + "\n",  # a list item is structure
    ],
)
def test_short_clauses_not_said_ten_times_in_prose_are_not_cut_in_their_sentence(text):
    assert [h.rule for h in scan_text(text, "text")] != ["stutter"]


def handful(lang: str, copies: int) -> tuple[str, int, int]:
    """A sentence that goes on saying two clauses, its connective changing each time; where
    it begins to say them, and where the second time begins."""
    if lang == "zh":
        head, opening = "西湖的傍晚很美。在这里，", "你可以漫步苏堤，感受春风拂面，"
        connectives, first, second = "也又还更", "可以漫步苏堤，", "感受春风拂面，"
    else:
        head, opening = "The lake is lovely at dusk. Here, ", "you can walk along the causeway, "
        connectives = ["and you", "or you", "then you", "so you"]
        first, second = " can walk along the causeway, ", "feel the spring breeze on your face, "
        opening += second
    text = head + opening
    again = len(text)
    for n in range(copies):
        text += connectives[(n * 3) % len(connectives)] + first + second
    return text, len(head), again


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("sizes", [(1,), (3,), (17,), (500,)])
def test_a_sentence_of_clauses_from_a_handful_is_cut_after_its_first_unit(lang, sizes):
    # no clause comes back to back, no sentence ends: only a handful of clauses, again
    text, opening, again = handful(lang, 20)
    hit = stream(text, "text", sizes=sizes)
    assert hit is not None and hit.rule == "stutter", hit
    assert (hit.loop_start, hit.prune_offset) == (opening, again)  # the first unit is kept
    # the watermark never steps back, and what it let out past the cut is the hit's lead-in
    detector, released, streamed = StreamDetector(), 0, None
    for pos in range(0, len(text), 3):
        streamed = detector.feed("text", text[pos : pos + 3])
        if streamed is not None:
            break
        safe = detector.safe_offset("text")
        assert safe >= released
        released = safe
    assert streamed is not None and released <= streamed.prune_offset + streamed.lead_in


TERMS = ["rent", "food", "fuel", "power", "water", "phone", "gym", "books", "gifts", "tax"]
TERMS += ["fees", "tips", "travel", "games", "music", "pets"]


@pytest.mark.parametrize(
    "text",
    [
        # a long sentence whose clauses say new things
        "我们先去了断桥，然后沿着白堤走到平湖秋月，接着坐船去了三潭印月，"
        "又在花港观鱼看了锦鲤，中午在楼外楼吃了西湖醋鱼，下午去了雷峰塔，"
        "傍晚在湖边看日落，晚上去河坊街逛夜市，买了一些龙井茶，最后回到酒店休息，"
        "第二天早上又去灵隐寺烧香，下午去了西溪湿地，傍晚才回到市区。\n",
        # a derivation worked step by step in one sentence
        "; ".join(f"c = {c}: max(skip = 0, take = dp[{c - 1}] + 1 = 1) = 1" for c in range(1, 16))
        + ".\n",
        # a running sum worked out in one sentence, a new term in each formula
        ", ".join(f"total = total + {name}" for name in TERMS) + ".\n",
        # cases that differ in their numbers
        ", ".join(f"in round {n} we add row {n} to the total" for n in range(1, 16)) + ".\n",
    ],
    ids=["new-clauses", "derivation", "running-sum", "numbered"],
)
def test_sentences_of_many_clauses_that_say_something_new_are_no_handful(text):
    assert [h.rule for h in scan_text(text, "text")] != ["stutter"]
    assert [h.rule for h in scan_text(text, "reasoning")] != ["stutter"]
