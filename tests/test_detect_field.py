"""Field shapes written apart from the loop matrix's generator: healthy answers and reasoning
a demanding user sends every day, and loops reported from the field, each in its own words.

The matrix (``tests/support/loopgen.py``) draws many texts of a few shapes; these are one text
each of many more, written as a model writes them. A healthy one must never be cut, in either
channel and in any chunking; a loop must be found and cut near its onset.
"""

from __future__ import annotations

import random

import pytest
from tests.detect_helpers import stream

from looprescue.detect import scan_text


def _healthy_texts() -> dict[str, str]:
    rng = random.Random(9)
    chorus_zh = (
        "我们是永不熄灭的灯火，\n我们是夜色写下的歌，\n坚持住，我们快到家了，\n"
        "这条路上没有人孤单。\n"
    )
    verses_zh = [
        "城市哼着疲倦的歌，\n出租车在月下慢慢挪，\n",
        "母亲说要守住那团火，\n要记得她的名字和承诺，\n",
    ]
    faq = [
        ("How do I reset my password?", "Use the reset link on the login page."),
        ("Can I change my email?", "Yes, under Settings."),
        ("Is there a mobile app?", "Yes, for iOS and Android."),
        ("How do I delete my account?", "Contact support."),
        ("Do you offer refunds?", "Within 30 days."),
        ("Where is my data stored?", "In the EU."),
        ("Can I export my data?", "Yes, as CSV."),
        ("Is 2FA available?", "Yes."),
    ]
    openers = ["Okay,", "Hmm,", "Okay,", "Wait,", "Okay,", "Hmm,", "So,", "Right,"]
    steps = [
        "the input is a list of intervals.",
        "they may overlap.",
        "sort them by start.",
        "what about empty input? Return empty.",
        "merge when the next start is at most the current end.",
        "touching intervals should merge too.",
        "the complexity is O(n log n) for the sort.",
        "that should be it.",
    ]
    zh_steps = [
        "数组是有序的。",
        "可以用二分查找。",
        "如果中间值小于目标，左边界右移。",
        "否则右边界左移。",
        "循环直到左右相遇。",
        "边界情况：空数组。",
        "有重复就找第一个。",
        "看起来没问题。",
        "先写函数签名。",
        "参数是数组和目标值。",
        "返回下标，找不到返回负一。",
        "用两个变量记录左右边界。",
        "注意中点不要溢出。",
        "写完后跑一下单元测试。",
        "再加一个全是重复元素的用例。",
        "最后补上文档字符串。",
    ]
    return {
        "song with its chorus five times": "".join(
            f"【主歌{n}】\n{v}\n【副歌】\n{chorus_zh}\n" for n, v in enumerate(verses_zh, 1)
        )
        + ("【副歌】\n" + chorus_zh) * 2
        + "【尾声】\n"
        + chorus_zh,
        "faq": "".join(f"Q: {q}\nA: {a}\n\n" for q, a in faq),
        "answer key": "".join(
            f"Statement {n}: {rng.choice(['true', 'false'])}.\n" for n in range(1, 41)
        ),
        "countdown": "".join(f"T-minus {n} seconds and holding.\n" for n in range(40, 0, -1)),
        "queue readings": "".join(
            f"[10:{k:02d}] Queue depth is {rng.randint(0, 12)} jobs\n" for k in range(40)
        ),
        "download log": "".join(
            f"下载进度：{rng.randint(1, 99)}%，剩余约 {rng.randint(0, 12)} 分钟\n"
            for _ in range(40)
        ),
        "reasoning with openers": "".join(
            f"{o} {s}\n\n" for o, s in zip(openers, steps, strict=True)
        ),
        "chinese reasoning with interjections": "".join(
            f"{rng.choice(['好。', '嗯。', '对。', '等等。'])}{s}\n" for s in zh_steps
        ),
        "derivation": "".join(
            f"{rng.choice(['So:', 'Simplify:', 'Then:'])}\n{rng.randint(2, 9)}x + "
            f"{rng.randint(2, 30)}y = {rng.randint(10, 400)}\nx = {rng.randint(2, 90)}\n\n"
            for _ in range(30)
        ),
        "zero table in a fence": "```c\nint m[16][16] = {\n"
        + "    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},\n" * 16
        + "};\n```\n",
        "lettered references": "".join(
            f"{letter}. {site}. (2021). {site}.\nRetrieved from <https://{site.lower()}.com/>\n\n"
            for letter, site in zip(
                "abcdef",
                ["Facebook", "Twitter", "Reddit", "IMVU", "Tumblr", "Discord"],
                strict=True,
            )
        ),
    }


HEALTHY = _healthy_texts()


@pytest.mark.parametrize("name", sorted(HEALTHY))
@pytest.mark.parametrize("channel", ["reasoning", "text"])
def test_a_healthy_field_text_is_never_cut(name, channel):
    text = HEALTHY[name]
    assert scan_text(text, channel) == [], name
    assert stream(text, channel, sizes=(3, 1, 7)) is None, name


LEAD = (
    "I need to figure out why the cache misses on the second request. The key includes the "
    "user id and the path, but maybe the query string is normalised differently.\n\n"
)


def _loops() -> dict[str, tuple[str, int]]:
    """Each loop after LEAD, with where its loop text begins (past the copy a periodic loop
    keeps)."""
    para = (
        "The model predicts the next token from the previous ones. It is trained on a large "
        "corpus of text."
    )
    rng = random.Random(1)
    marks = ["**Final Answer**", "**Final Answer:**", "**Final Answer**.", "**Final Answer!**"]
    return {
        "one word, an apology, the word again": (
            LEAD
            + "banana " * 40
            + "\n\nSorry, I got stuck there. Let me continue.\n\n"
            + "banana " * 60,
            len(LEAD) + len("banana "),
        ),
        "a marker re-emitted with its punctuation changing": (
            LEAD + "".join(rng.choice(marks) + "\n\n" for _ in range(60)),
            len(LEAD),
        ),
        "a two-sentence paragraph line after line": (
            LEAD + (para + "\n") * 30,
            len(LEAD) + len(para) + 1,
        ),
        "a Chinese phrase pool with no separators": (
            LEAD
            + "".join(
                rng.choice(["好。", "继续。", "输出。", "现在写。", "开始写。"]) for _ in range(400)
            ),
            len(LEAD),
        ),
    }


LOOPS = _loops()


@pytest.mark.parametrize("name", sorted(LOOPS))
@pytest.mark.parametrize("channel", ["reasoning", "text"])
def test_a_field_loop_is_found_and_cut_near_its_onset(name, channel):
    text, cut = LOOPS[name]
    hit = stream(text, channel, sizes=(3, 1, 7))
    assert hit is not None, name
    # cut where its loop text begins, give or take a separator
    assert abs(hit.prune_offset - cut) <= 2, (name, hit.prune_offset - cut)
