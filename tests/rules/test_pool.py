"""Rule pool: reshuffled short phrases with no exact period."""

from __future__ import annotations

import json
import random

import pytest
from tests.detect_helpers import derivation, stream
from tests.paths import REPO_ROOT
from tests.support import loopgen

from looprescue.detect import StreamDetector, scan_text
from looprescue.detect.rules.pool import PoolRule

HEALTHY = REPO_ROOT / "corpus" / "healthy.jsonl"
LEAD = (
    "The retry test still fails on Windows because the temp dir is removed before the handle "
    "closes. I should close the handle in the finally block and then rerun the suite.\n\n"
)


def _shuffled(phrases: list[str], count: int, seed: int, sep: str = "\n\n") -> str:
    rng = random.Random(seed)
    return sep.join(rng.choice(phrases) for _ in range(count)) + sep


def test_english_phrase_pool_is_cut_where_the_batch_first_appeared():
    pool = ["Go.", "Output.", "Now.", "OK.", "Let me write."]
    text = LEAD + _shuffled(pool, 120, seed=3)
    hit = stream(text, "reasoning", sizes=(2, 3, 6))
    assert hit is not None and hit.rule == "pool"
    # the coherent lead-in is kept, and none of the pool's phrases
    assert hit.prune_offset == hit.loop_start == len(LEAD)
    for phrase in ("go", "output", "now", "ok", "let me write"):
        assert phrase in hit.evidence


def test_chinese_pool_splits_on_full_stops_without_whitespace():
    pool = ["好。", "输出。", "（输出）", "现在。", "写。"]
    rng = random.Random(5)
    text = "用户要求修复锁文件的竞争问题。我先检查写入顺序，然后再修改。" + "".join(
        rng.choice(pool) for _ in range(200)
    )
    hit = stream(text, "reasoning")
    assert hit is not None and hit.rule == "pool"
    assert hit.prune_offset >= len("用户要求修复锁文件的竞争问题。我先检查写入顺序，然后再修改。")


# one phrase in five ends a sentence: most sentences are strings of openers no two alike
OPENERS = {
    "zh": ["等等，", "嗯，", "不对，", "好，", "让我再想想。"],
    "en": ["Wait,", "Hmm,", "Actually,", "So,", "Let me reconsider."],
}


@pytest.mark.parametrize("channel", ["reasoning", "text"])
@pytest.mark.parametrize(
    ("lang", "gap"), [("zh", ""), ("en", " "), ("mixed", " ")], ids=["zh", "en", "mixed"]
)
def test_openers_strung_by_clause_marks_are_a_pool(channel, lang, gap):
    # ``Wait, Wait, 嗯， Let me reconsider.``: a sentence end comes only now and then, so each
    # sentence is a new string of the same few openers; its clauses are the pool's phrases
    phrases = OPENERS["zh"][:2] + OPENERS["en"] if lang == "mixed" else OPENERS[lang]
    rng = random.Random(7)
    body = "".join(rng.choice(phrases) + rng.choice([gap] * 8 + ["\n"]) for _ in range(400))
    text = LEAD + body
    hit = stream(text, channel, sizes=(1, 3, 7))
    assert hit is not None and hit.rule == "pool", hit
    assert hit.prune_offset == len(LEAD)  # none of the pool is kept
    assert hit.fired_at - len(LEAD) < 800


@pytest.mark.parametrize("channel", ["reasoning", "text"])
@pytest.mark.parametrize(
    "text",
    [
        # a song's lines end in commas: a clause of a line is no opener
        "".join(
            "再见了，梧桐树下的操场，\n再见了，黑板上没擦的光，\n别说再见，只说远方，\n"
            f"像十八岁这样。\n\n{verse}\n\n"
            for verse in [
                "运动会上喊哑的嗓子，\n雨天里共撑的一把伞。",
                "也许明天就各奔东西，\n也许很多年才能相遇。",
            ]
        ),
        # openers before a clause of content: one sentence each, as written
        "".join(
            f"Wait, {claim}. Hmm, {check}. So, {verdict}.\n"
            for claim, check, verdict in [
                ("the sum is 12", "let me add them again", "it holds"),
                ("the product is 35", "five times seven", "that is right"),
                ("the mean is 4", "twelve over three", "fine"),
                ("the median is 5", "the middle of three", "it checks out"),
            ]
        ),
    ],
    ids=["song", "openers-with-content"],
)
def test_clauses_of_content_are_no_openers(channel, text):
    assert stream(text, channel) is None


def test_english_period_without_whitespace_does_not_split_sentences():
    # "v1.2.3" and "a.b.c" are one sentence each; if the dots split them, the fragments would
    # form a recurring short-phrase pool.
    names = ["httpx", "orjson", "pydantic", "typer", "rich", "zstandard", "uvicorn", "starlette"]
    places = ["api.cfg", "web.sub.cfg", "cli.main.toml", "lock.d.ini", "ci.env.yml"]
    lines = [
        f"Bumped {names[i % 8]} from v1.{i}.2 to v1.{i + 1}.0 in {places[i % 5]} after checking "
        f"a.b.c and {names[(i * 3) % 8]}.{places[(i * 2) % 5]}."
        for i in range(40)
    ]
    assert scan_text(" ".join(lines), "reasoning") == []


def test_one_phrase_alone_is_not_a_pool():
    # A single phrase repeated is a cycle (if long enough), never a pool of one.
    text = LEAD + "OK. " * 200
    hits = scan_text(text, "reasoning")
    assert hits and hits[0].rule == "cycle"


HEALTHY_REASONING = """\
OK. The lock is taken first, then the header is written. Wait. Is that the order in the
writer? Let me check. The writer opens the file with O_APPEND and calls flock before it
writes anything. Good. So the header cannot interleave with another writer. Hmm. Then why
did the test see two headers? OK. Maybe the test itself opens two writers without the lock.
Let me check the fixture. The fixture creates the session directory and then starts two
threads. Wait. Each thread builds its own writer, and the second one truncates the file.
That is the bug: truncation happens before flock. OK. The fix is to open without O_TRUNC and
truncate only after the lock is held. Hmm. But the reader must also tolerate an empty file
during that window. Let me check the reader. It treats an empty file as "no header yet" and
retries. Good. So the plan: move the truncate after flock, add a test with two writers, and
run the suite. Wait. One more thing: the Windows path uses LockFileEx, which has different
semantics. OK. LockFileEx locks a byte range, so I will lock the first byte, which matches
what flock does for our purposes. Hmm. That should be enough. Let me write the patch now.
OK."""


def test_healthy_reasoning_with_recurring_interjections_does_not_fire():
    # "OK." / "Wait." / "Hmm." / "Let me check." recur, but between new, coherent sentences.
    assert scan_text(HEALTHY_REASONING, "reasoning") == []
    assert stream(HEALTHY_REASONING, "reasoning", sizes=(2, 4, 6)) is None


@pytest.mark.parametrize("channel", ["reasoning", "text"])
def test_a_log_line_whose_number_varies_is_no_pool(channel):
    # A quoted log whose lines differ only in a measurement taking a few values: every line
    # recurs, but it is one line of a log, not a rotation of phrases.
    rng = random.Random(3)
    beats = "".join(f"INFO heartbeat ok (latency {rng.randint(3, 9)} ms)\n" for _ in range(40))
    log = "The worker log shows:\n" + beats + "\nSo the worker was alive the whole time.\n"
    assert scan_text(log, channel) == []
    zh = "".join(f"[INFO] 心跳正常 (延迟 {rng.randint(3, 9)} 毫秒)\n" for _ in range(40))
    assert scan_text("日志如下：\n" + zh + "\n所以进程一直在运行。\n", channel) == []
    # phrases with numbers that are not one line said with a varying number still rotate
    mixed = ["Retry 3.", "OK.", "Now.", "Go.", "Emit 2.", "Let me write."]
    hit = scan_text(LEAD + _shuffled(mixed, 120, seed=5), channel)
    assert hit and hit[0].rule == "pool" and hit[0].prune_offset == len(LEAD)
    # and so do two steps said in turn among other phrases
    steps = ["Step 1.", "Step 2.", "OK.", "Now.", "Go."]
    hit = scan_text(LEAD + _shuffled(steps, 120, seed=6), channel)
    assert hit and hit[0].rule == "pool" and hit[0].prune_offset == len(LEAD)


_CHORUS_ZH = (
    "我们是永不熄灭的灯火，\n我们是夜色写下的歌，\n坚持住，我们快到家了，\n这条路上没有人孤单。\n"
)
_VERSES_ZH = [
    "城市哼着疲倦的歌，\n出租车在月下慢慢挪，\n",
    "母亲说要守住那团火，\n要记得她的名字和承诺，\n",
    "冬天来了又走了，\n我们数着朋友也数着雨，\n",
]


@pytest.mark.parametrize("channel", ["reasoning", "text"])
def test_a_chorus_sung_after_every_verse_is_no_pool(channel):
    # A song whose chorus of short lines comes back five times, the last two back to back.
    song = "".join(
        f"【主歌{n}】\n{verse}\n【副歌】\n{_CHORUS_ZH}\n" for n, verse in enumerate(_VERSES_ZH, 1)
    )
    song += "【副歌】\n" + _CHORUS_ZH + "【尾声】\n" + _CHORUS_ZH
    assert scan_text(song, channel) == []
    assert stream(song, channel, sizes=(2, 5)) is None
    # a rotation with a new sentence or two between its turns is no song: it goes on
    turns = []
    for n in range(40):
        turns.append("好。继续。输出。")
        if n % 3 == 2:
            turns.append(f"第{n}次检查配置文件。再看一眼日志的第{n}行。")
    hit = scan_text(LEAD + "".join(turns), channel)
    assert hit and hit[0].prune_offset == len(LEAD)
    assert hit[0].fired_at - len(LEAD) < 400


_LETTER_ZH = (
    "周五的例会改到下午三点。\n地点还是三楼的会议室。\n请带上本周的进度表。\n此致敬礼，项目组\n"
)


@pytest.mark.parametrize("channel", ["reasoning", "text"])
@pytest.mark.parametrize("gap", ["\n", "\n\n"])
def test_one_letter_to_a_few_people_under_their_salutations_is_no_pool(channel, gap):
    # Short sentences said in one order under a new salutation each time: letters, not a
    # rotation of phrases (a salutation is a verse of its own)
    names = ["王芳", "李强", "陈伟", "赵敏", "刘洋", "孙丽"]
    text = LEAD + "---\n".join(f"{n}，你好：{gap}{_LETTER_ZH}" for n in names)
    assert scan_text(text, channel) == []
    assert stream(text, channel, sizes=(2, 5)) is None
    # its sentences drawn in another order each time are a rotation, salutations or not
    rng = random.Random(7)
    lines = _LETTER_ZH.splitlines()
    mixed = LEAD + "---\n".join(
        f"{n}，你好：{gap}" + "".join(rng.sample(lines, len(lines))) + "\n" for n in names * 2
    )
    hit = scan_text(mixed, channel)
    assert hit and hit[0].rule == "pool"


def _deepseek_pool(seed: int) -> tuple[str, int]:
    """600 chars of Chinese planning, then 6,000 of a skewed, reshuffled pool written as
    DeepSeek writes it: no spaces, a line break now and then, a phrase twice in a row."""
    rng = random.Random(seed)
    plan = "".join(
        [
            "用户要求我写一个函数来解析配置文件。首先我需要确认文件格式是YAML还是JSON。",
            "然后决定用哪个库。考虑到兼容性，我会先检查扩展名，再尝试两种解析器。",
            "如果两者都失败，就抛出一个清晰的错误。另外，配置里可能有环境变量的引用，",
            "需要在加载后展开。测试要覆盖空文件和损坏的文件。默认值的合并顺序是命令行优先，",
            "其次是环境变量，最后是文件本身。日志要记录最终生效的来源。",
            "接口定为 load_config(path)，返回一个字典，出错时抛出 ConfigError。",
            "然后写实现，再补单元测试。最后检查类型注解和文档字符串是否完整，",
            "确保别人读得懂，也方便以后维护和扩展这个模块。还要想一想并发读取的情况：",
            "多个进程同时加载同一个文件时，不应该互相影响，也不该留下临时文件。",
        ]
    )
    pool, weights = ["好。", "继续。", "输出。", "现在写。", "OK。", "开始写。"], [5, 3, 3, 2, 1, 1]
    out: list[str] = []
    while sum(map(len, out)) < 6000:
        phrase = rng.choices(pool, weights)[0]
        out.append(phrase * (2 if rng.random() < 0.2 else 1))
        if rng.random() < 0.1:
            out.append("\n")
    return plan + "".join(out), len(plan)


def test_deepseek_chinese_pool_without_separators_is_cut_at_its_onset():
    # poolMinChars counts a CJK char as two, and the run reaches back far enough to hold a
    # hundred of the narrowest phrases: the pool fires within ~300 chars wide of its onset
    for seed in range(4):
        text, onset = _deepseek_pool(seed)
        hit = stream(text, "reasoning", sizes=(2, 5, 3))
        assert hit is not None and hit.rule == "pool"
        assert hit.prune_offset == onset
        assert hit.fired_at - onset <= 300  # chars: 600 wide at most
        assert scan_text(text, "text")[0].prune_offset == onset


def test_a_cycle_that_settles_out_of_a_pool_keeps_none_of_it():
    # a reshuffled batch, then one of its phrases on and on: the cycle's cut moves back to
    # where the batch began
    rng = random.Random(2)
    batch = "".join(rng.choice(["OK. ", "Go. ", "Now. ", "Emit. "]) for _ in range(24))
    text = LEAD + batch + "Go. " * 40
    hit = stream(text, "reasoning", sizes=(4, 1))
    assert hit is not None and hit.prune_offset == len(LEAD)


def test_chinese_sentences_as_wide_as_english_ones_are_no_short_phrases():
    # 20-odd CJK chars say as much as 40-odd English ones: paragraphs of such sentences said
    # again are cut after a copy, not by a pool at the first sentence that repeats
    for seed, sep in ((0, "space"), (1, "none"), (2, "space")):
        case = loopgen.make("alternating", seed, "zh", sep, "reasoning")
        hit = stream(case.text, "reasoning", sizes=(5,))
        assert hit is not None and hit.rule != "pool"
        assert case.first_copy_end <= hit.prune_offset <= case.second_copy


def test_a_marker_line_with_changing_punctuation_is_cut_within_300_wide():
    # one phrase, its end mark changing: no period, and 20-odd chars a copy would take the
    # window 23 copies; the batch judged alone fires once it fills poolMinChars
    rng = random.Random(4)
    for marker in ("[END OF ANSWER]", "**最终答案**"):
        lines = "".join(
            marker + rng.choice(["", ".", "!", "。", "：", "..."]) + "\n" for _ in range(60)
        )
        hit = stream(LEAD + lines, "text", sizes=(3,))
        assert hit is not None and hit.rule == "pool" and hit.prune_offset == len(LEAD)
        assert hit.fired_at - len(LEAD) <= 400


@pytest.mark.parametrize("channel", ["text", "reasoning"])
def test_a_boxed_final_answer_said_again_under_changing_markers_is_a_pool(channel):
    # ``\\boxed{1}`` frames an answer, it is no formula: with the markers around it, a pool
    rng = random.Random(7)
    markers = ["**Final Answer**", "**Final Answer:**", "Final answer — 1", "### Final Answer"]
    lines = "".join(
        rng.choice(markers) + "\n" + rng.choice(["", "\n"]) + "\\boxed{1}\n\n" for _ in range(30)
    )
    hit = stream(LEAD + lines, channel, sizes=(3,))
    assert hit is not None and hit.rule == "pool" and hit.prune_offset == len(LEAD)
    assert hit.fired_at - len(LEAD) <= 400


@pytest.mark.parametrize("channel", ["text", "reasoning"])
def test_boxed_formulas_restated_in_a_derivation_are_no_pool(channel):
    # what a frame holds still counts: ``\\boxed{x = 2}`` restated between steps is a formula
    rng = random.Random(3)
    steps = ["So:", "Hence:", "Check:", "Then:"]
    lines = []
    for _ in range(30):
        lines.append(rng.choice(steps))
        lines.append(f"{rng.randint(2, 9)}x + {rng.randint(2, 30)} = {rng.randint(10, 400)}")
        lines.append(rng.choice(["\\boxed{x = 2}", "\\boxed{y = 7}"]))
    text = LEAD + "\n\n".join(lines) + "\n\nThat gives the answer.\n"
    assert stream(text, channel, sizes=(3,)) is None


def test_a_block_of_sentences_said_again_is_no_young_batch():
    # four short sentences in a fixed order, said again and again: a cycle's, which keeps
    # one copy (a batch judged alone is one to three phrases)
    block = "Open the file. Read the header. Check the size. Close it.\n"
    hit = stream(LEAD + block * 12, "reasoning", sizes=(3,))
    assert hit is not None and hit.rule == "cycle"
    assert hit.prune_offset in (len(LEAD), len(LEAD) + len(block))


def test_a_long_sentence_said_again_that_opened_the_batch_is_cut_with_it():
    # paragraphs whose first sentence is long and the rest short phrases, said again: the
    # long one ended the run when it was new, but the loop says it again, so it opened it
    case = loopgen.make("alternating", 3, "mixed", "blank", "reasoning")
    hit = stream(case.text, "reasoning", sizes=(4,))
    assert hit is not None
    assert hit.prune_offset in (case.onset, case.first_copy_end) or (
        case.first_copy_end <= hit.prune_offset <= case.second_copy
    )


def test_day_lists_that_mix_a_counter_with_a_pool_of_words():
    # Labels whose numbers stay or jump about, over a handful of words: a pool, none kept.
    rng = random.Random(3)
    acts = ["Rest", "Run", "Stretch"]
    days = "".join(f"Day {rng.randint(1, 9)}: {rng.choice(acts)}\n" for _ in range(60))
    hit = stream("Your plan:\n\n" + days, "text")
    assert hit is not None and hit.rule == "pool"
    assert hit.prune_offset == len("Your plan:\n\n")  # none of the list is kept


@pytest.mark.parametrize("channel", ["reasoning", "text"])
def test_status_lines_under_a_bracketed_counter_are_a_pool(channel):
    # ``[check 6] OK.`` again and again, its counter creeping on and its punctuation changing:
    # a label in brackets is dropped as ``Day 3:`` is, and what is left is one word
    rng = random.Random(5)
    number, lines = 1, []
    for _ in range(60):
        number += rng.choice([0, 0, 1])
        lines.append(f"[check {number}] {rng.choice(['OK.', 'OK!', 'ok', 'OK..', '【OK】'])}\n")
    head = "All checks pass.\n\n"
    hit = stream(head + "".join(lines), channel)
    assert hit is not None and hit.rule == "pool"
    assert hit.prune_offset == len(head)  # none of the status lines is kept


@pytest.mark.parametrize("channel", ["reasoning", "text"])
def test_an_enumeration_of_short_answers_is_no_pool(channel):
    # Labels that count up by one over a handful of answers are an answer key or a schedule
    # (what a request for 60 days or 40 statements gets): only the request bounds them.
    rng = random.Random(3)
    acts = ["Rest", "Run", "Stretch"]
    days = "".join(f"Day {n}: {rng.choice(acts)}\n" for n in range(1, 61))
    assert scan_text("Your 60-day plan:\n\n" + days, channel) == []
    key = "".join(f"Statement {n}: {rng.choice(['true', 'false'])}.\n" for n in range(1, 41))
    assert scan_text("Going through each statement.\n" + key, channel) == []
    checks = "".join(f"[check {n}] {rng.choice(['OK.', 'failed.'])}\n" for n in range(1, 41))
    assert scan_text("Running the checks.\n" + checks, channel) == []


_MIXED_WIDTHS = {
    "en": [
        "So the answer is 3.",
        "So there are 3 r's.",
        "Wait, let me recount the letters one by one: s-t-r-a-w.",
        "Hmm, but let me count them again to be sure of the total.",
    ],
    "zh": [
        "所以答案是3。",
        "总共有3个r。",
        "等等，让我再从头到尾仔细地数一遍这个单词里的每一个字母。",
        "嗯，不过为了确保万无一失，我还是再逐个字母检查一遍吧。",
    ],
}


@pytest.mark.parametrize("channel", ["reasoning", "text"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_pool_with_longer_sentences_among_its_phrases(lang, channel):
    # An answer and a recount, each said one of two ways, drawn in no order: the recounts are
    # past poolMaxPhraseChars, so the phrases alone cover half the window, yet every unit of
    # it recurs. A pool, cut where its streak of repeats began: a form's first appearance may
    # stay, and a repeat or two before a new form restarted the streak.
    rng = random.Random(5)
    forms = _MIXED_WIDTHS[lang]
    units = []
    for _ in range(40):
        units += [rng.choice(forms[:2]), rng.choice(forms[2:])]
    text = LEAD + "\n".join(units) + "\n"
    hit = stream(text, channel)
    assert hit is not None and hit.rule == "pool"
    kept = text[len(LEAD) : hit.prune_offset]
    assert len(kept.splitlines()) <= 2 * len(forms)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_longer_sentences_said_again_between_new_ones_are_no_pool(lang):
    # The same forms, but a case of its own between every few of them: the checks of a
    # search say their verdicts again, yet each step brings something new.
    rng = random.Random(5)
    forms = _MIXED_WIDTHS[lang]
    lines = []
    for n in range(40):
        lines.append(
            f"第{n + 1}种情况：取x={n * 7 + 3}，代入后得到{n * n + 11}。"
            if lang == "zh"
            else f"Case {n + 1}: with x = {n * 7 + 3} the sum comes to {n * n + 11}."
        )
        lines += [forms[rng.choice([0, 2, 3])] for _ in range(2)]
    assert stream(LEAD + "\n".join(lines) + "\n", "reasoning") is None


def test_copies_that_differ_in_a_word_rotate_as_a_pool():
    rng = random.Random(9)
    forms = ["Let me check the file.", "Let me check the code.", "Let me check the test."]
    text = LEAD + "\n".join(rng.choice(forms) for _ in range(60))
    hit = stream(text, "reasoning")
    assert hit is not None and hit.rule in ("pool", "cycle")
    # phrases this long are not held back as they come: a pool of them is cut at its first
    # repeat, keeping each phrase's first appearance (as a cycle keeps its first copy)
    kept = text[len(LEAD) : hit.prune_offset]
    assert kept.count("Let me check") <= 2 * len(forms)


PHRASES = ["OK.", "Go.", "Now.", "Output.", "Let me write."]


def _reshuffled_lines(prefix: str, count: int = 150, seed: int = 1) -> str:
    rng = random.Random(seed)
    return "".join(f"{prefix}{rng.choice(PHRASES)}\n" for _ in range(count))


def test_list_items_table_rows_and_quotes_do_not_count_in_text():
    for prefix in ("- ", "* ", "1. ", "| ", "> "):
        body = _reshuffled_lines(prefix)
        assert scan_text(body, "text") == [], prefix
    # the same phrases as plain reasoning sentences are a pool loop
    assert scan_text(_reshuffled_lines(""), "reasoning")[0].rule == "pool"
    assert scan_text(_reshuffled_lines(""), "text")[0].rule == "pool"


# --------------------------------------------------------------------------- the hold


def _held_at_end_of(text: str, upto: str) -> int:
    """Chars the watermark still holds once ``text`` has come up to the end of ``upto``."""
    from looprescue.detect import StreamDetector

    detector = StreamDetector(watch="both")
    stop = text.index(upto) + len(upto)
    for at in range(0, stop, 3):
        detector.feed("text", text[at : min(at + 3, stop)])
    return stop - detector.safe_offset("text")


@pytest.mark.parametrize(
    "sentence",
    ["In this case, \\( a = 324 \\), the angle is small.", "So it is \\boxed{x = 1} here."],
)
def test_a_latex_command_being_written_is_judged_once_whole(sentence):
    # ``\\`` alone reads as a formula mark, ``\\(`` frames a phrase: the sentence is not let
    # out at the backslash and held again at the bracket
    from looprescue.config import DetectorConfig
    from looprescue.detect.registry import RULE_NAMES

    only_pool = DetectorConfig(ignore=[n for n in RULE_NAMES if n != "pool"])
    detector = StreamDetector(only_pool, watch="both")
    released = 0
    for ch in "Then the modulus follows.\n\n" + sentence + "\n":
        assert detector.feed("reasoning", ch) is None
        safe = detector.safe_offset("reasoning")
        assert safe >= released, (released, safe)
        released = safe


def test_a_formula_clause_opens_no_string_of_openers_once_released():
    # ``64 is 2^6,`` is a formula, no opener like ``Wait,``: the sentence it begins, let out
    # as a formula, is never held again when its clause ends
    from looprescue.config import DetectorConfig
    from looprescue.detect.registry import RULE_NAMES

    only_pool = DetectorConfig(ignore=[n for n in RULE_NAMES if n != "pool"])
    text = "So r^2 = 657/64.\n\n64 is 2^6, and 657 is odd, so they share no factor.\n"
    detector = StreamDetector(only_pool, watch="both")
    released = 0
    for ch in text:
        assert detector.feed("reasoning", ch) is None
        safe = detector.safe_offset("reasoning")
        assert safe >= released, (released, safe)
        released = safe


MARKDOWN = (
    "Here is how the game works.\n\n### Team setup\n"
    "- **Teams:** each team has eight to eleven players on the field.\n"
    "- **Positions:** a pitcher, a catcher, four basemen and the outfield.\n"
    "- **Innings:** a game has six innings, each team kicking once per inning.\n"
    "- **Outs:** three outs end a half inning, as in baseball.\n"
)


def test_a_heading_is_not_held_through_the_new_list_under_it():
    # the heading is a short unit that could open a pool, but the list items under it are
    # new text between it and anything that could repeat it: a run of short units no more
    held = _held_at_end_of(MARKDOWN, "as in baseball.\n")
    assert held < len("- **Outs:** three outs end a half inning, as in baseball.\n")


def test_list_items_said_again_keep_the_run_of_headings_held():
    # a loop of sections whose items repeat: items said again break nothing, so from the
    # second section on (the first one's items were new) the headings' run is held whole
    section = "Day 1: Breakfast:\n* Lunch: Banana, cheese, crackers\n* Snacks: Banana, honey\n\n"
    text = section + section.replace("Day 1", "Day 2") + section.replace("Day 1", "Day 3")
    assert _held_at_end_of(text, text) == len(text) - text.index("Day 2")


def _watermarks(text: str, channel: str = "text") -> list[int]:
    from looprescue.detect import StreamDetector

    detector = StreamDetector(watch="both")
    marks = []
    for at in range(0, len(text), 3):
        detector.feed(channel, text[at : at + 3])
        marks.append(detector.safe_offset(channel))
    return marks


def test_a_long_sentence_said_again_is_held_from_its_start_while_it_is_written():
    # said again, it starts a streak of repeats there (a block said again is cut where its
    # repeats began): the watermark must not let it out and then step back (found on a real
    # reasoning trace, corpus/healthy.jsonl sky-t1-aime24-6, with a formula in it; a formula
    # said again is no repeat now, see test_a_formula_is_no_phrase_the_watermark_holds)
    said = (
        "I have the surface area and the volume, so the sum of the pairwise products is "
        "twenty-seven and their product is twenty-three.\n\n"
    )
    # further back than the periodic watermark looks (cycleMaxPeriod, which would hold it
    # too), within the long sentences the pool remembers (LONG_MEMORY)
    prose = loopgen.preamble(random.Random(3), "en", "reasoning", chars=4100)
    between = prose.replace(". ", "; ")  # a few long sentences
    text = said + between + "\n\nLet me express a^2 + b^2 + c^2 in S and V.\n\n" + said
    for channel in ("reasoning", "text"):
        marks = _watermarks(text, channel)
        assert marks == sorted(marks)  # never back
        second = text.rindex(said)
        assert all(mark <= second for mark in marks[: (second + len(said) - 3) // 3])


@pytest.mark.parametrize(
    "under",
    [
        "The aim is to score more runs than the other team by kicking the ball far",
        "- **Teams:** each team has eight to eleven players on the field, and a pitcher",
    ],
    ids=["long sentence", "new list item"],
)
def test_a_heading_is_released_while_what_is_under_it_is_written(under):
    # a new sentence or list item longer than any phrase ends the run when it ends (a
    # barrier), and no phrase of the run came twice: the heading can no longer open a pool,
    # nor a batch a cycle settles into
    heading = "Here is the plan.\n\n### Objective:\n"
    marks = _watermarks(heading + under)
    assert marks[-1] > len(heading)


def test_a_run_with_a_phrase_said_twice_stays_held_under_a_long_sentence():
    # "OK." came twice: a batch may be forming, and a loop inside the long sentence would be
    # cut where the batch began (a small model that degenerates after a few short phrases)
    start = "Here is the plan for the answer, in the order the user asked for it.\n\n"
    batch = "OK. Go on. OK. "
    sentence = "Then the model writes a long sentence that could still turn into the loop"
    marks = _watermarks(start + batch + sentence)
    assert marks[-1] <= len(start)


def test_a_long_new_list_item_ends_the_run_of_phrases_before_it():
    # phrases before the item (none twice yet) and the same phrases after it: the pool after
    # the item is cut where it began, the phrases before the item go out (a run of their own)
    before = "OK.\nGo.\nNow.\n"
    item = "- the lock file is written before the header, so a crash leaves it stale\n"
    text = before + item + _reshuffled_lines("", count=120, seed=9)
    hits = scan_text(text, "text")
    assert hits and hits[0].rule == "pool"
    assert hits[0].prune_offset == len(before + item)
    # an item no longer than a phrase is only between the phrases: the cut reaches back
    short = "- the lock file\n"
    hits = scan_text(before + short + _reshuffled_lines("", count=120, seed=9), "text")
    assert hits and hits[0].prune_offset < len(before)
    # once a phrase came twice a batch may be forming, and a block of it said again may hold
    # a new item (a meal plan whose days repeat but for one dish): the cut still reaches back
    again = before + "OK.\n"
    hits = scan_text(again + item + _reshuffled_lines("", count=120, seed=9), "text")
    assert hits and hits[0].prune_offset < len(again)


def test_a_heading_said_in_every_section_is_not_held_through_the_lists_under_it():
    # "Questions:" said again starts a streak of repeats; the new list items under it are no
    # repeats, so the streak is over before the next section (found on a real answer,
    # corpus/healthy.jsonl alpacaeval-claude-3-5-sonnet-20240620-153)
    sections = []
    for role in ("Chief Executive Officer", "Chief Marketing Officer", "Chief Financial Officer"):
        items = "".join(
            f"- What does the {role.lower()} expect from {topic} over the next two years?\n"
            for topic in ("pricing", "the stores", "online sales", "hiring", "the brand")
        )
        sections.append(f"{role}\n\nQuestions:\n{items}\n")
    text = "Here are the interviews to plan.\n\n" + "".join(sections)
    marks = _watermarks(text)
    last = text.rindex("Questions:")
    assert marks[-1] > last


def test_a_batch_of_more_than_three_phrases_waits_for_the_window():
    # A young batch is judged alone only when it is a handful (YOUNG_BATCH_PHRASES, the guard
    # this test holds: widened, the first text is cut): a marker line and its variants. Four
    # phrases said five times each are left to the window of poolWindow sentences, which this
    # text does not fill: no hit yet.
    phrases = ["Check the lock now.", "Read the header now.", "Write the frame now.", "Close it."]
    rng = random.Random(4)
    batch = [p for p in phrases for _ in range(5)]
    rng.shuffle(batch)
    text = "Here is what the tool does, step by step, as the user asked.\n\n" + " ".join(batch)
    assert scan_text(text, "reasoning") == []
    # three of them said as often are a young batch, cut where it began
    three = [p for p in phrases[:3] for _ in range(6)]
    rng.shuffle(three)
    text = "Here is what the tool does, step by step, as the user asked.\n\n" + " ".join(three)
    hits = scan_text(text, "reasoning")
    assert hits and hits[0].rule == "pool"


def test_a_chinese_clause_is_no_phrase_the_watermark_holds():
    # HOLD_CHARS is a width: a Chinese sentence of a dozen chars (24 wide) is a clause, no
    # 好。 or 输出。, and a paragraph of them is not held as a run that could become a pool
    sentences = [
        "索引需要先检查排好序的编号。",
        "写入器比较默认的超时时间。",
        "缓存层转换每一个空行的数据。",
        "请求处理器合并环境变量的覆盖。",
        "日志模块记录每次调用的结果。",
        "测试用例重新构建排好序的编号。",
        "批处理任务比较带行号的错误。",
        "调度器负责返回最大的分桶数据。",
    ]
    text = "下面是这个模块的说明，按用户要求的顺序。\n\n" + "".join(sentences)
    marks = _watermarks(text, "reasoning")
    assert len(text) - marks[-1] <= len(sentences[-1])
    # the short phrases of a pool are held as they come
    pool = "下面是这个模块的说明，按用户要求的顺序。\n\n好。继续。输出。现在写。"
    assert _watermarks(pool, "reasoning")[-1] <= pool.index("好")


@pytest.mark.parametrize("channel", ["reasoning", "text"])
def test_a_formula_is_no_phrase_the_watermark_holds(channel):
    # An equation is as short as a phrase, but no pool is made of formulas or code: a
    # derivation is not held as a run that could become a pool, only its word lines are.
    text = LEAD + derivation(2)
    assert scan_text(text, channel) == []
    marks = _watermarks(text, channel)
    ends = [min(at, len(text)) for at in range(3, len(text) + 3, 3)]
    assert max(end - mark for end, mark in zip(ends, marks, strict=True)) < 120
    # a pool of words between the formulas is still one
    words = ["Now.", "OK.", "Go.", "Let me write.", "Emit."]
    pool = LEAD + "x = 2\n\n" + _shuffled(words, 80, seed=3)
    hit = scan_text(pool, channel)
    assert hit and hit[0].rule == "pool" and hit[0].prune_offset == pool.index("x = 2") + 7


def test_a_lettered_list_item_is_structure_from_its_marker_on():
    # "b. Twitter. (2021). Twitter." ends its first sentence at its marker: the line's kind,
    # settled there, is a list item, so its short sentences are no run of phrases (they were
    # held until the next paragraph, 280 chars on an answer of references)
    sites = ["Facebook", "Twitter", "Second Life", "IMVU", "Reddit", "Tumblr", "Discord"]
    refs = "".join(
        f"{'abcdefg'[k]}. {site}. (2021). {site}.\nRetrieved from <https://{site.lower()}.com/>\n\n"
        for k, site in enumerate(sites)
    )
    text = "Here are the sources, by kind of platform:\n\n" + refs
    assert scan_text(text, "text") == []
    marks = _watermarks(text, "text")
    ends = [min(at, len(text)) for at in range(3, len(text) + 3, 3)]
    assert max(end - mark for end, mark in zip(ends, marks, strict=True)) < 60


def test_code_in_a_reasoning_fence_is_no_run_of_phrases():
    # An agent plans edits in its reasoning: old and new versions of a few lines, fenced, whose
    # short lines (copyBtn,) recur. In a fence they are code in either channel, no phrases: the
    # reasoning was held back 779 chars where the answer was held 184.
    old = "\t\t\t\tReact.createElement('span', {{ className: '{k}' }}, x),\n\t\t\t\tcopyBtn,\n"
    new = old + "\t\t\t\texpandBtn,\n"
    text = "I need the expand button in each header. Targeted edits:\n\n" + "".join(
        f"The {k} header:\nold:\n```\n{old.format(k=k)}```\nnew:\n```\n{new.format(k=k)}```\n\n"
        for k in ("fallback", "pretty", "read block", "write block", "diff view")
    )
    held = {}
    for channel in ("reasoning", "text"):
        assert scan_text(text, channel) == []
        marks = _watermarks(text, channel)
        ends = [min(at, len(text)) for at in range(3, len(text) + 3, 3)]
        held[channel] = max(end - mark for end, mark in zip(ends, marks, strict=True))
    assert held["reasoning"] == held["text"] < 300


def test_a_restated_equation_is_no_repeat_of_a_streak():
    # A real reasoning trace (corpus/healthy.jsonl, a competition problem) restates long
    # equations as it works; each one said again started a streak of repeats the pool held
    # back from, 265 chars at worst. A formula said again is no such repeat.
    records = (json.loads(line) for line in HEALTHY.open(encoding="utf-8"))
    text = next(r["text"] for r in records if r["id"] == "sky-t1-aime24-15")
    assert _pool_hold(text, "reasoning") < 200


def _pool_hold(text: str, channel: str) -> int:
    """The longest stretch the pool rule alone holds back, the text fed in 3-char deltas."""
    detector = StreamDetector(watch="both")
    rules = detector._channel(channel)
    pool = next(rule for rule in rules._holding_rules if isinstance(rule, PoolRule))
    worst = 0
    for at in range(0, len(text), 3):
        assert detector.feed(channel, text[at : at + 3]) is None
        detector.safe_offset(channel)
        held = min(at + 3, len(text)) - pool.safe_offset(rules._win, rules._segmenter)
        worst = max(worst, held)
    return worst


@pytest.mark.parametrize("channel", ["reasoning", "text"])
def test_code_said_again_in_a_fence_counts_against_a_run(channel):
    # "改为：" (change it to:) before every new version of some code: a phrase that recurs,
    # then the code again. The fence line is no phrase (``ts`` was one in the reasoning), and
    # a line of code said again is a unit against the run, not nothing: the run of 改为 was
    # held through the whole block (343 chars).
    names = ["identity", "agent", "version", "client", "token", "session", "locale"]
    code = "".join(f"    const {n} = resolve{n.title()}(region)\n" for n in names)
    text = (
        "先读当前的代码：\n```ts\n"
        + code
        + "```\n\n改为：\n```ts\n"
        + code
        + "    const fallback = fallbackIdentity(region)\n```\n\n然后改调用点，保存之后再读一遍。\n"
    )
    assert scan_text(text, channel) == []
    assert _pool_hold(text, channel) < 150


def test_a_list_item_too_long_to_read_again_still_ends_the_run():
    # A list item past LONG_UNIT chars is clipped when it ends; its kind, read when its first
    # sentence ended, still makes it the structure line it is, so the run before it ends, as
    # the watermark promised while it was written (the phrase above it went out then).
    from looprescue.detect.limits import LONG_UNIT

    head = "Here is the plan for the answer, in the order the user asked for it.\n\nOK.\n"
    prose = loopgen.preamble(random.Random(5), "en", "text", chars=LONG_UNIT + 200)
    item = "- The first step. " + " ".join(prose.split())
    assert len(item) > LONG_UNIT
    text = head + item + "\n" + _reshuffled_lines("", count=120, seed=3)
    marks = _watermarks(text)
    hits = scan_text(text, "text")
    assert hits and hits[0].rule == "pool"
    assert hits[0].prune_offset >= len(head + item)
    assert max(marks) <= hits[0].prune_offset + hits[0].lead_in
