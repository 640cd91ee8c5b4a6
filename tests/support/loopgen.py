"""Generated model output for the detector's loop matrix: loops of every shape, and healthy
text that repeats itself for good reasons, each after a preamble that reads like a model's.

Every generator takes a ``random.Random`` and the case's language (``zh``, ``en``, ``mixed``),
separator and channel, and gives a ``Case``: the text, and for a loop where it begins, how much
of it a cut may keep (one copy of a periodic unit, nothing of a pool) and how wide its unit is.
The words come from small vocabularies joined at random, so a healthy text never says the same
sentence twice by accident, and a loop's copies are the only repetition in it.
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

LANGS = ("zh", "en", "mixed")
# how phrases and sentences of a loop are joined
SEPARATORS = ("none", "space", "newline", "blank", "random")
CHANNELS = ("reasoning", "text")

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def width(text: str) -> int:
    """Chars, a CJK char counted as two (as the detector's bounds count them)."""
    return len(text) + len(_CJK.findall(text))


@dataclass(frozen=True)
class Case:
    shape: str
    text: str
    channel: str
    # loops only: where the loop begins, and where the end of its first copy is (a cut may keep
    # the text up to either: none of a pool, one copy of a periodic unit)
    onset: int | None = None
    first_copy_end: int | None = None
    unit_width: int = 0
    # the latest user message, for rules that read the request
    request: str = ""
    # where the second copy begins, when text the cut may keep lies between the copies
    second_copy: int | None = None
    # chars of one period of the loop, when that is more than its first copy (a paragraph
    # and its near-variant)
    period: int = 0

    @property
    def is_loop(self) -> bool:
        return self.onset is not None


# -- vocabulary ------------------------------------------------------------------------------
_EN_SUBJECTS = [
    "the parser",
    "the cache",
    "this function",
    "the retry loop",
    "the config loader",
    "the test suite",
    "the migration",
    "the request handler",
    "the scheduler",
    "the index",
    "our fallback",
    "the lock",
    "the writer",
    "the client",
    "the batch job",
    "the reader",
]
_EN_VERBS = [
    "needs",
    "reads",
    "skips",
    "checks",
    "rejects",
    "returns",
    "keeps",
    "drops",
    "builds",
    "retries",
    "validates",
    "caches",
    "sorts",
    "parses",
    "logs",
    "merges",
]
_EN_OBJECTS = [
    "the header first",
    "every empty line",
    "a stale entry",
    "the user's token",
    "the last offset",
    "an error with the line number",
    "two copies of the key",
    "the default timeout",
    "each column in order",
    "the schema version",
    "a partial frame",
    "the environment override",
    "the largest bucket",
    "a sorted list of ids",
    "the original bytes",
    "one record per call",
]
_EN_TAILS = [
    "before it writes anything",
    "so the caller can recover",
    "when the file is missing",
    "on every restart",
    "after the lock is taken",
    "unless the flag is set",
    "in the slow path only",
    "which keeps memory flat",
    "and that is enough here",
    "because the spec says so",
    "for the second pass",
    "while the queue drains",
]
_ZH_SUBJECTS = [
    "解析器",
    "缓存层",
    "这个函数",
    "重试逻辑",
    "配置加载器",
    "测试用例",
    "迁移脚本",
    "请求处理器",
    "调度器",
    "索引",
    "回退方案",
    "写入器",
    "客户端",
    "批处理任务",
    "读取器",
    "日志模块",
]
_ZH_VERBS = [
    "需要先检查",
    "会跳过",
    "应该拒绝",
    "负责返回",
    "保留",
    "丢弃",
    "重新构建",
    "校验",
    "缓存",
    "排序",
    "解析",
    "记录",
    "合并",
    "比较",
    "统计",
    "转换",
]
_ZH_OBJECTS = [
    "文件头",
    "每一个空行",
    "过期的条目",
    "用户的令牌",
    "最后的偏移量",
    "带行号的错误",
    "重复的键",
    "默认的超时",
    "每一列的顺序",
    "模式版本",
    "不完整的帧",
    "环境变量的覆盖",
    "最大的分桶",
    "排好序的编号",
    "原始字节",
    "每次调用的记录",
]
_ZH_TAILS = [
    "然后再写入",
    "这样调用方可以恢复",
    "在文件缺失的时候",
    "每次重启都要做",
    "在拿到锁之后",
    "除非设置了标志",
    "只在慢路径里",
    "这样内存不会增长",
    "这里就够了",
    "因为规范这么要求",
    "用于第二遍处理",
    "在队列清空之前",
]


def _sentence(rng: random.Random, lang: str, half: int | None = None) -> str:
    """A sentence of four random parts. ``half`` (0 or 1) draws subjects and objects from one
    half of the lists only: a preamble and a loop drawn from different halves share no
    sentence a word or two apart, as a model's planning and the loop it then falls into
    rarely do."""
    return _said(*_sentence_parts(rng, lang, half))


def _sentence_parts(
    rng: random.Random, lang: str, half: int | None = None
) -> tuple[str, tuple[str, str, str, str]]:
    """The language and the four parts of a sentence ``_sentence`` would draw."""
    if lang == "mixed":
        lang = rng.choice(("zh", "en"))

    def pick(words: list[str]) -> str:
        return rng.choice(words if half is None else words[half::2])

    if lang == "zh":
        parts = (
            pick(_ZH_SUBJECTS),
            rng.choice(_ZH_VERBS),
            pick(_ZH_OBJECTS),
            rng.choice(_ZH_TAILS),
        )
    else:
        parts = (
            pick(_EN_SUBJECTS),
            rng.choice(_EN_VERBS),
            pick(_EN_OBJECTS),
            rng.choice(_EN_TAILS),
        )
    return lang, parts


def _said(lang: str, parts: tuple[str, str, str, str]) -> str:
    if lang == "zh":
        return parts[0] + parts[1] + parts[2] + "，" + parts[3] + "。"
    text = " ".join(parts)
    return text[0].upper() + text[1:] + "."


def _distinct_sentences(
    rng: random.Random, lang: str, n: int, half: int | None = 1, apart: bool = False
) -> list[str]:
    """``n`` sentences, no two the same. With ``apart``, no two a part apart either: the
    sentences of one copy of a loop's unit. A copy that says a sentence twice with one word
    changed restates itself, and a rule may rightly cut there, inside what the matrix holds
    to be the first copy."""
    seen: set[str] = set()
    drawn: list[tuple[str, tuple[str, str, str, str]]] = []
    out: list[str] = []
    while len(out) < n:
        said_in, parts = _sentence_parts(rng, lang, half)
        s = _said(said_in, parts)
        if s in seen:
            continue
        if apart and any(
            other_in == said_in and sum(a == b for a, b in zip(parts, other, strict=True)) >= 3
            for other_in, other in drawn
        ):
            continue
        seen.add(s)
        drawn.append((said_in, parts))
        out.append(s)
    return out


def _join_prose(sentences: list[str]) -> str:
    """Sentences as a paragraph: a space after an English one, nothing after a Chinese one."""
    out = ""
    for s in sentences:
        if out and not out.endswith("。"):
            out += " "
        out += s
    return out


def _alike(a: str, b: str) -> bool:
    return difflib.SequenceMatcher(None, a, b).ratio() > 0.7


def preamble(rng: random.Random, lang: str, channel: str, chars: int = 600) -> str:
    """Planning prose (reasoning) or an answer's opening (text), about ``chars`` wide, that
    says nothing twice, not even a word or two apart (a model restating its own sentences is
    looping already); it ends at a paragraph break."""
    paragraphs: list[str] = []
    used: list[str] = []
    total = 0
    while total < chars:
        para: list[str] = []
        for _ in range(rng.randint(2, 4)):
            s = _sentence(rng, lang, 0)
            while any(_alike(s, other) for other in used):
                s = _sentence(rng, lang, 0)
            used.append(s)
            para.append(s)
        text = _join_prose(para)
        paragraphs.append(text)
        total += width(text)
    if channel == "text":
        paragraphs.insert(0, "## " + ("方案" if lang == "zh" else "Plan"))
    return "\n\n".join(paragraphs) + "\n\n"


# -- separators -------------------------------------------------------------------------------
def _joiner(rng: random.Random, sep: str, lang: str) -> Callable[[str], str]:
    """What follows one phrase or sentence of a loop."""

    def after(piece: str) -> str:
        if sep == "none":
            # English needs a space after a full stop to end a sentence there; a model writing
            # English "without separators" still writes that one space
            return "" if piece.endswith(("。", "！", "？")) else " "
        if sep == "space":
            return " "
        if sep == "newline":
            return "\n"
        if sep == "blank":
            return "\n\n"
        # random: mostly as written, now and then a line break
        r = rng.random()
        if r < 0.12:
            return "\n"
        if r < 0.16:
            return "\n\n"
        return "" if piece.endswith(("。", "！", "？")) else " "

    return after


def _weave(rng: random.Random, pieces: list[str], sep: str, lang: str) -> str:
    after = _joiner(rng, sep, lang)
    return "".join(p + after(p) for p in pieces)


# -- loops ------------------------------------------------------------------------------------
_POOL_ZH = [
    "好。",
    "继续。",
    "输出。",
    "现在写。",
    "OK。",
    "开始写。",
    "写吧。",
    "嗯。",
    "就这样。",
]
_POOL_EN = [
    "OK.",
    "Now.",
    "Emit.",
    "Go.",
    "Let me write.",
    "Continue.",
    "Write it.",
    "Done.",
    "Start writing.",
]


def _pool_phrases(rng: random.Random, lang: str, k: int) -> list[str]:
    if lang == "zh":
        return rng.sample(_POOL_ZH, k)
    if lang == "en":
        return rng.sample(_POOL_EN, k)
    half = max(1, k // 2)
    return rng.sample(_POOL_ZH, half) + rng.sample(_POOL_EN, k - half)


def _loop_case(
    shape: str,
    rng: random.Random,
    lang: str,
    channel: str,
    body: str,
    first_copy: int,
    unit_width: int,
    request: str = "",
    pre: str | None = None,
    after: str = "",
    second_copy: int | None = None,
    period: int = 0,
) -> Case:
    head = preamble(rng, lang, channel) if pre is None else pre
    return Case(
        period=period or first_copy,
        second_copy=None if second_copy is None else len(head) + second_copy,
        shape=shape,
        text=head + body + after,
        channel=channel,
        onset=len(head),
        first_copy_end=len(head) + first_copy,
        unit_width=unit_width,
        request=request,
    )


def pool(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A reshuffled pool: phrases drawn with skewed frequencies, some twice in a row."""
    phrases = _pool_phrases(rng, lang, rng.randint(3, 6))
    weights = [rng.choice((1, 2, 3, 5, 8)) for _ in phrases]
    pieces: list[str] = []
    while sum(width(p) for p in pieces) < 2400:
        p = rng.choices(phrases, weights)[0]
        pieces.append(p)
        if rng.random() < 0.25:
            pieces.append(p)  # back to back
    body = _weave(rng, pieces, sep, lang)
    return _loop_case("pool", rng, lang, channel, body, 0, max(width(p) for p in phrases))


_OPENERS = {
    "zh": ["等等，", "嗯，", "不对，", "让我再想想。", "所以。", "好，"],
    "en": ["Wait,", "Hmm,", "Actually,", "Let me reconsider.", "OK.", "So,"],
}


def opener_pool(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A pool of openers that end in a clause mark (``Wait,``, ``等等，``) and short phrases,
    strung together with no sentence end between many of them: a reasoning model that can
    no longer say what comes after ``Wait,``."""
    if lang == "mixed":
        phrases = rng.sample(_OPENERS["zh"], 3) + rng.sample(_OPENERS["en"], 3)
    else:
        phrases = rng.sample(_OPENERS[lang], rng.randint(4, 6))
    weights = [rng.choice((1, 2, 3, 5)) for _ in phrases]
    pieces: list[str] = []
    while sum(width(p) for p in pieces) < 2400:
        p = rng.choices(phrases, weights)[0]
        pieces.append(p)
        if rng.random() < 0.25:
            pieces.append(p)  # back to back
    after = _joiner(rng, sep, lang)

    def joined(piece: str) -> str:
        gap = after(piece)
        # a Chinese comma takes no space after it, as a full stop does not
        return "" if gap == " " and piece.endswith("，") and sep != "space" else gap

    body = "".join(p + joined(p) for p in pieces)
    return _loop_case("opener_pool", rng, lang, channel, body, 0, max(width(p) for p in phrases))


def rotation(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A fixed rotation of a few short phrases (``Now. OK. Emit.``)."""
    phrases = _pool_phrases(rng, lang, rng.randint(2, 4))
    pieces = phrases * (1 + 2400 // sum(width(p) + 1 for p in phrases))
    after = _joiner(rng, "space" if sep == "random" else sep, lang)
    body = "".join(p + after(p) for p in pieces)
    unit = "".join(p + after(p) for p in phrases)
    # a rotation of phrases this short is a pool as much as a cycle: either cut is right
    return _loop_case("rotation", rng, lang, channel, body, len(unit), width(unit))


def sentence_cycle(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """One to three sentences said again and again."""
    unit_sentences = _distinct_sentences(rng, lang, rng.randint(1, 3), apart=True)
    after = _joiner(rng, "space" if sep == "random" else sep, lang)
    unit = "".join(s + after(s) for s in unit_sentences)
    copies = max(6, 1 + 1500 // width(unit))
    return _loop_case("sentence_cycle", rng, lang, channel, unit * copies, len(unit), width(unit))


_CHECKLIST = {
    "zh": ["检查锁。", "读取头部。", "写入帧。", "关闭文件。", "再核对一遍。"],
    "en": ["Check the lock.", "Read the header.", "Write the frame.", "Close the file.", "Go on."],
}


def short_block(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A sentence and four to five very short ones after it (a checklist), said again and
    again: a cycle, its first copy kept, though most of it is phrases a pool is made of."""
    base = "zh" if lang == "zh" or (lang == "mixed" and rng.random() < 0.5) else "en"
    lead = _sentence(rng, lang, 1)
    shorts = rng.sample(_CHECKLIST[base], rng.randint(4, 5))
    after = _joiner(rng, "space" if sep == "random" else sep, lang)
    unit = "".join(s + after(s) for s in [lead, *shorts])
    copies = max(6, 1 + 1500 // width(unit))
    return _loop_case("short_block", rng, lang, channel, unit * copies, len(unit), width(unit))


def paragraph_blocks(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A block of one to twelve paragraphs (up to 4,000 chars) written again and again."""
    n = rng.randint(1, 12)
    sizes = [rng.randint(2, 4) for _ in range(n)]
    # (drawn together: no sentence of the block a part apart from another)
    sentences = _distinct_sentences(rng, lang, sum(sizes), apart=True)
    paras = [_join_prose(sentences[sum(sizes[:i]) : sum(sizes[: i + 1])]) for i in range(n)]
    while len("\n\n".join(paras)) > 3900:
        paras.pop()
    gap = "\n" if sep == "newline" else "\n\n"
    block = gap.join(paras) + gap
    # three copies of a long block, then the model goes on: the third copy is where a person
    # sees the loop; a short one, as many as take it past 300 wide and two copies more
    copies = max(3, -(-(300 + 2 * width(block)) // width(block)) + 1)
    tail = _join_prose(_distinct_sentences(rng, lang, 8, half=0)) + "\n"
    return _loop_case(
        "paragraph_blocks",
        rng,
        lang,
        channel,
        block * copies,
        len(block),
        width(block),
        after=tail,
    )


def _variant(rng: random.Random, sentence: str, lang: str) -> str:
    """The sentence with one word (English) or one phrase (Chinese) changed."""
    if lang == "zh" or (lang == "mixed" and "。" in sentence):
        for old in _ZH_TAILS:
            if old in sentence:
                return sentence.replace(old, rng.choice([t for t in _ZH_TAILS if t != old]), 1)
    for old in _EN_TAILS:
        if old in sentence:
            return sentence.replace(old, rng.choice([t for t in _EN_TAILS if t != old]), 1)
    return sentence + ("再确认一次。" if lang == "zh" else " Check it again.")


def alternating(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """Deliberation that alternates between two near-variants of a paragraph, three times,
    then goes on."""
    sentences = _distinct_sentences(rng, lang, rng.randint(3, 5))
    a = _join_prose(sentences)
    k = rng.randrange(len(sentences))
    b = _join_prose([*sentences[:k], _variant(rng, sentences[k], lang), *sentences[k + 1 :]])
    gap = "\n" if sep == "newline" else "\n\n"
    unit = a + gap + b + gap
    # the variant is a near-copy of the first paragraph: a cut may keep that alone
    return _loop_case(
        "alternating",
        rng,
        lang,
        channel,
        unit * 3,
        len(a + gap),
        width(unit),
        second_copy=len(unit),
        period=len(unit),
        after=_join_prose(_distinct_sentences(rng, lang, 8, half=0)) + "\n",
    )


_EN_HEDGES = ["usually", "often", "mostly", "always", "still", "now"]
_ZH_HEDGES = ["通常", "一般", "往往", "总是", "仍然", "现在"]


def _hedged(rng: random.Random, lang: str, n: int) -> list[str]:
    """``n`` sentences a copy may open with another hedge word."""
    return _distinct_sentences(rng, lang, n)


def _hedge(sentence: str, word: int) -> str:
    if "。" in sentence:
        return _ZH_HEDGES[word] + "，" + sentence
    return _EN_HEDGES[word].capitalize() + ", " + sentence[0].lower() + sentence[1:]


def drifting(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A block of one to four paragraphs said again and again, each copy with a hedge word
    swapped in one of its paragraphs (``usually`` for ``often``, ``通常`` for ``一般``): a
    model sampling at some temperature loops without repeating itself char for char."""
    paras = [_hedged(rng, lang, rng.randint(2, 3)) for _ in range(rng.randint(1, 4))]
    words = [[rng.randrange(len(_EN_HEDGES)) for _ in p] for p in paras]
    gap = "\n" if sep == "newline" else "\n\n"

    def render() -> str:
        texts = [
            _join_prose([_hedge(sentence, w) for sentence, w in zip(para, picks, strict=True)])
            for para, picks in zip(paras, words, strict=True)
        ]
        return gap.join(texts) + gap

    copies = [render()]
    while sum(width(c) for c in copies) < 4 * width(copies[0]) or len(copies) < 5:
        k = rng.randrange(len(paras))
        j = rng.randrange(len(paras[k]))
        words[k][j] = rng.choice([w for w in range(len(_EN_HEDGES)) if w != words[k][j]])
        copies.append(render())
    return _loop_case(
        "drifting",
        rng,
        lang,
        channel,
        "".join(copies),
        len(copies[0]),
        width(copies[0]),
        after=_join_prose(_distinct_sentences(rng, lang, 8, half=0)) + "\n",
    )


# A short check said again and again, one slot's word swapped each time; every word of a slot
# is one token (one CJK char in Chinese), so a swap is one edit.
_RECHECKS = {
    "en": [
        (
            "Wait, let me {} that {} times 143 {} 1001.",
            [["check", "confirm", "recheck", "verify"], ["7", "seven"], ["equals", "gives", "is"]],
        ),
        (
            "Hmm, I should {} the {} once more before I {} it.",
            [
                ["check", "review", "recheck", "verify"],
                ["sum", "total", "result"],
                ["state", "give"],
            ],
        ),
    ],
    "zh": [
        (
            "等等，让我{}{}一下七乘一百四十三是不是{}于一千零一。",
            [["再", "又"], ["算", "验", "查", "核"], ["等", "相"]],
        ),
        (
            "嗯，我还是{}{}一遍这个{}数比较稳妥。",
            [["再", "又"], ["算", "验", "查", "核"], ["总", "结", "乘"]],
        ),
    ],
}


def rechecked(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A short check (seven to nine tokens, or a Chinese sentence of some twenty chars) said
    again line after line, one word swapped each time, now and then said as before: a model
    that keeps re-verifying one step of its work."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    template, slots = rng.choice(_RECHECKS[base])
    choice = [0] * len(slots)
    pieces = []
    for _ in range(30):
        pieces.append(template.format(*(words[i] for words, i in zip(slots, choice, strict=True))))
        slot = rng.randrange(len(slots))
        choice[slot] = rng.randrange(len(slots[slot]))
    after = _joiner(rng, sep, base)
    first = pieces[0] + after(pieces[0])
    body = first + "".join(p + after(p) for p in pieces[1:])
    return _loop_case("rechecked", rng, lang, channel, body, len(first), width(pieces[0]))


def _zh_numeral(n: int) -> str:
    """``n`` (1 to 99) in Chinese words: 7 七, 12 十二, 20 二十, 35 三十五."""
    digits = "一二三四五六七八九"
    tens, ones = divmod(n, 10)
    head = "" if tens == 0 else ("十" if tens == 1 else digits[tens - 1] + "十")
    return head + (digits[ones - 1] if ones else "")


# How a list numbers item ``n``: "12. ", then the marks of Chinese text.
_ZH_ITEM_MARKS: tuple[Callable[[int], str], ...] = (
    lambda n: f"{n}. ",
    lambda n: f"{n}、",
    lambda n: f"（{_zh_numeral(n)}）",
    lambda n: f"{_zh_numeral(n)}、",
    lambda n: f"第{_zh_numeral(n)}条 ",
)


def numbered_item(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A numbered item whose sentence stays while its number moves on, a note or a summary
    between some copies."""
    sentence = _sentence(rng, lang, 1)
    n0 = rng.randint(3, 9)
    note = "注意：" if lang == "zh" else "Note: "
    # Chinese text numbers its items in marks of its own as often as with "12."
    mark = rng.choice(_ZH_ITEM_MARKS) if lang != "en" else _ZH_ITEM_MARKS[0]
    parts = []
    for i in range(12):
        item = f"{mark(n0 + i)}{sentence}\n"
        r = rng.random()
        if r < 0.3:
            item += f"\n{note}{_sentence(rng, lang, 1)}\n\n"
        elif r < 0.5:
            item += "\n" + _join_prose(_distinct_sentences(rng, lang, 2)) + "\n\n"
        parts.append(item)
    first = len(f"{mark(n0)}{sentence}\n")
    return _loop_case(
        "numbered_item",
        rng,
        lang,
        channel,
        "".join(parts),
        first,
        width(parts[0]),
        second_copy=len(parts[0]),
        period=len("".join(parts)) // len(parts),
    )


def step_blocks(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A numbered step block with a code fence, written again under a new heading."""
    steps = _distinct_sentences(rng, lang, 3)
    code = "```python\nconfig = load_config(path)\nvalidate(config)\n```\n"
    head = "步骤" if lang == "zh" else "Step"
    blocks = []
    for i in range(6):
        body = "".join(f"{k + 1}. {s}\n" for k, s in enumerate(steps))
        blocks.append(f"### {head} {i + 2}\n\n{body}\n{code}\n")
    pre = None
    if rng.random() < 0.5:
        # a step of its own before the loop, ending in a fence as each copy does: the copies
        # then recur from its closing fence line
        first = _distinct_sentences(rng, lang, 1)[0]
        pre = f"{preamble(rng, lang, channel)}### {head} 1\n\n{first}\n\n{code}\n"
    return _loop_case(
        "step_blocks",
        rng,
        lang,
        channel,
        "".join(blocks),
        len(blocks[0]),
        width(blocks[0]),
        pre=pre,
    )


def short_lines(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A run of short lines drawn from a handful (a base model's chant)."""
    if lang == "zh":
        lines = ["好的", "继续", "下一步", "完成", "没问题"]
    elif lang == "en":
        lines = ["ok", "next", "done", "go on", "fine"]
    else:
        lines = ["好的", "ok", "继续", "next", "done"]
    pick = rng.sample(lines, rng.randint(2, 4))
    body = "".join(rng.choice(pick) + "\n" for _ in range(160))
    return _loop_case("short_lines", rng, lang, channel, body, 0, max(map(width, pick)) + 1)


def word_repeat(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """One word or clause repeated dozens of times, interrupted once, then resumed."""
    if lang == "zh" or (lang == "mixed" and rng.random() < 0.5):
        unit = rng.choice(["好的", "然后", "我们可以使用这个方法，", "对不起"])
        sorry = "抱歉，我重复了。"
    else:
        unit = rng.choice(["the", "sorry ", "and then ", "we can use the table, "])
        sorry = "Sorry, I repeated myself. "
    after = _joiner(rng, "space" if sep == "random" else sep, lang)
    unit = unit + (after(unit) if unit[-1] not in " ，" else "")
    reps = max(40, 300 // width(unit) + 20)
    body = unit * reps + sorry + unit * reps
    return _loop_case("word_repeat", rng, lang, channel, body, len(unit), width(unit))


def code_lines(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A line of code written again and again inside a fence."""
    line = rng.choice(
        [
            "result = json.dumps(result, indent=2)\n",
            "data = data.to_json(orient='records')\n",
            "self.assertEqual(response.status_code, 200)\n",
        ]
    )
    body = "```python\n" + line * 60
    return _loop_case(
        "code_lines", rng, lang, channel, body, len("```python\n") + len(line), width(line)
    )


_DEFINITIONS = [
    (
        "python",
        "def get_db():\n    conn = sqlite3.connect(DB_PATH)\n    conn.row_factory = sqlite3.Row\n"
        "    return conn\n",
        "# Open a new connection for each request\n",
    ),
    (
        "javascript",
        "function fetchUser(id) {\n  const url = `${API}/users/${id}`;\n"
        "  return fetch(url).then((r) => r.json());\n}\n",
        "// Fetch one user by id\n",
    ),
    (
        "go",
        "func (s *Store) Get(key string) (string, bool) {\n\ts.mu.RLock()\n"
        "\tdefer s.mu.RUnlock()\n\tv, ok := s.data[key]\n\treturn v, ok\n}\n",
        "// Get reads one key\n",
    ),
]
_OTHER_DEFINITIONS = {
    "python": "def get_user(user_id):\n    return get_db().execute(SQL, (user_id,)).fetchone()\n",
    "javascript": "function showUser(user) {\n  panel.textContent = user.name;\n}\n",
    "go": "func (s *Store) Len() int {\n\treturn len(s.data)\n}\n",
}


def redefined_code(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """One function written again and again inside a fence, a comment before some copies and
    another function now and then between them: no two stretches alike."""
    language, definition, comment = rng.choice(_DEFINITIONS)
    other = _OTHER_DEFINITIONS[language]
    head = f"```{language}\n"
    parts = [definition]
    for _ in range(9):
        between = rng.choice(["", comment, comment, other + "\n"])
        parts.append(between + definition)
    body = head + "\n".join(parts)
    return _loop_case(
        "redefined_code", rng, lang, channel, body, len(head) + len(definition), width(definition)
    )


_RETRY_REMARKS = {
    "en": [
        "The build still fails. Running it again.",
        "Same error at the dependency step. Let me run it once more.",
        "Still failing; one more try.",
    ],
    "zh": [
        "构建还是失败了，再运行一次。",
        "依赖这一步又报同样的错，我再跑一遍。",
        "还是失败，再试一次。",
    ],
}


def retried(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """An agent's command and its error output, each in a fence, run again and again with a
    changing remark between: the remark changes, the fences never do."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    command = rng.choice(["docker build -t api:dev .", "npm run build", "cargo build --release"])
    output = (
        "```\nerror: failed to compile `api` (exit code 1)\n"
        "  --> src/main.rs:12:5: cannot find value `config` in this scope\n"
        "note: run with `RUST_BACKTRACE=1` for a backtrace\n```\n"
    )
    run = f"```bash\n$ {command}\n```\n\n" + output
    body = run
    for _ in range(7):
        body += "\n" + rng.choice(_RETRY_REMARKS[base]) + "\n\n" + run
    # (the first run and its output are what was asked; what comes after is the loop)
    pre = preamble(rng, lang, channel)
    remark = max(len(r) for r in _RETRY_REMARKS[base])
    return _loop_case(
        "retried",
        rng,
        lang,
        channel,
        body[len(run) :],
        0,
        width(run),
        pre=pre + run,
        period=remark + len(run),
    )


def table_rows(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A markdown table that keeps writing the same row."""
    if lang == "zh":
        header, row = "| 名称 | 说明 |\n|---|---|\n", "| 缓存 | 保存最近的结果 |\n"
    else:
        header, row = "| Name | Notes |\n|---|---|\n", "| cache | keeps the latest result |\n"
    return _loop_case(
        "table_rows", rng, lang, channel, header + row * 60, len(header) + len(row), width(row)
    )


_SIGHTS = {
    "zh": [("北京", "故宫", "长城"), ("上海", "外滩", "豫园"), ("广州", "广州塔", "陈家祠"),
           ("深圳", "世界之窗", "大梅沙"), ("成都", "宽窄巷子", "熊猫基地"),
           ("杭州", "西湖", "灵隐寺"), ("西安", "兵马俑", "城墙"), ("南京", "中山陵", "夫子庙")],
    "en": [("Lisbon", "Belem Tower", "Alfama"), ("Porto", "Ribeira", "Livraria Lello"),
           ("Seville", "Alcazar", "Plaza de Espana"), ("Madrid", "Prado", "Retiro"),
           ("Lyon", "Fourviere", "Vieux Lyon"), ("Nice", "Promenade", "Castle Hill"),
           ("Turin", "Mole", "Egyptian Museum"), ("Genoa", "Aquarium", "Via Garibaldi")],
}  # fmt: skip


def table_rounds(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A comparison table that goes round three to five of its rows again and again, a row's
    sights said one of two ways each time (``西湖``, ``西湖、灵隐寺``), so no round is the same
    text: the first round is kept."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    places = rng.sample(_SIGHTS[base], 8)
    if base == "zh":
        head, note, also = "| 城市 | 景点 | 花费 | 备注 |\n|---|---|---|---|\n", "适合周末", "、"
    else:
        head, note, also = "| City | Sights | Cost | Note |\n|---|---|---|---|\n", "a weekend", ", "
    cost = {city: rng.randint(300, 900) for city, _, _ in places}

    def row(city: str, sights: str) -> str:
        return f"| {city} | {sights} | {cost[city]} | {note} |\n"

    fresh = "".join(row(city, one + also + two) for city, one, two in places[:2])
    cycle = places[2 : 2 + rng.randint(3, 5)]
    rounds = [
        "".join(row(city, rng.choice((one, one + also + two))) for city, one, two in cycle)
        for _ in range(12)
    ]
    return _loop_case(
        "table_rounds",
        rng,
        lang,
        channel,
        "".join(rounds),
        len(rounds[0]),
        width(rounds[0]),
        pre=preamble(rng, lang, channel) + head + fresh,
    )


def _data_row(rng: random.Random, kind: str, lang: str, i: int) -> str:
    if kind == "log":
        loss, lr = rng.uniform(0.2, 2.5), rng.uniform(1e-4, 1e-3)
        if lang == "zh":
            return f"第{i * 50}步 损失 {loss:.4f} 学习率 {lr:.6f}\n"
        return f"step {i * 50} loss {loss:.4f} lr {lr:.6f}\n"
    if kind == "table":
        return f"| {i} | {rng.randint(100, 999)} | {rng.uniform(0, 1):.2f} |\n"
    return f"{i},{rng.randint(1000, 9999)},{rng.uniform(0, 100):.1f}\n"


def stuck_row(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """Data whose numbers move on row by row (a training log, a table, CSV), until the model
    writes one row again and again: the rows before it are data, no part of the loop."""
    kind = rng.choice(("log", "table", "csv"))
    header = {"log": "", "table": "| # | count | share |\n|---|---|---|\n", "csv": "id,n,pct\n"}
    n = rng.randint(8, 30)
    rows = "".join(_data_row(rng, kind, lang, i) for i in range(1, n))
    row = _data_row(rng, kind, lang, n)
    head = preamble(rng, lang, channel) + header[kind] + rows
    return _loop_case("stuck_row", rng, lang, channel, row * 40, len(row), width(row), pre=head)


def overrun(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A list that counts on far past the count the user asked for (in words or digits)."""
    n = rng.choice((10, 12, 20))
    words = {10: ("ten", "十"), 12: ("twelve", "十二"), 20: ("twenty", "二十")}[n]
    in_words = rng.random() < 0.5
    if lang == "zh":
        request = f"请写出{words[1] if in_words else n}个用户编号，每行一个。"
        item = "用户编号 {i}"
    else:
        request = f"Give me {words[0] if in_words else n} user ids, one per line."
        item = "user id {i}"
    items = [f"{i}. {item.format(i=i)}\n" for i in range(1, 10 * n)]
    head = preamble(rng, lang, channel) + "".join(items[:n])
    return _loop_case(
        "overrun",
        rng,
        lang,
        channel,
        "".join(items[n:]),
        0,
        width(items[n]),
        request=request,
        pre=head,
    )


_STOPS = {
    "zh": (
        "游览西湖断桥",
        "灵隐寺和飞来峰",
        "河坊街、南宋御街",
        "乘船游湖",
        "中国茶叶博物馆",
        "雷峰塔",
    ),
    "en": ("the old town", "the castle", "a tram ride", "the river walk", "the tile museum"),
}


def _plan(rng: random.Random, lang: str, count: int) -> tuple[str, list[str]]:
    """A request for a plan of ``count`` days or chapters, and 40 section blocks of such a
    plan (headings numbered from 1, a few bullets drawn from a handful under each)."""
    small = {2: ("two", "两"), 3: ("three", "三"), 4: ("four", "四")}[count]
    in_words = rng.random() < 0.5
    if lang == "zh":
        request, heading = rng.choice(
            (
                (f"帮我规划一个{small[1] if in_words else count}天的杭州旅游行程。", "### 第{i}天"),
                (f"给我写一个{small[1] if in_words else count}章的故事大纲。", "## 第{i}章"),
            )
        )
    else:
        request, heading = rng.choice(
            (
                (f"Plan a {count}-day trip to Lisbon.", "## Day {i}"),
                (f"Plan {small[0] if in_words else count} days in Lisbon for me.", "**Day {i}**"),
            )
        )
    stops = _STOPS["zh" if lang != "en" else "en"]  # (mixed: an English plan of Chinese stops)
    blocks = [
        heading.format(i=i)
        + "\n\n"
        + "".join(f"- {rng.choice(stops)}\n" for _ in range(rng.randint(2, 3)))
        + "\n"
        for i in range(1, 41)
    ]
    return request, blocks


def section_overrun(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A plan of a few days asked for (a small count), its day headings written on and on."""
    count = rng.choice((2, 3, 4))
    request, blocks = _plan(rng, lang, count)
    past = blocks[count:]
    return _loop_case(
        "section_overrun",
        rng,
        lang,
        channel,
        "".join(past),
        0,
        width(past[0]),
        request=request,
        pre=preamble(rng, lang, channel) + "".join(blocks[:count]),
        period=sum(map(len, past)) // len(past),
    )


def marker_lines(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A marker line re-emitted again and again, its punctuation changing."""
    marker = {
        "zh": rng.choice(["**最终答案**", "【回答结束】", "以上就是全部内容"]),
        "en": rng.choice(["[END OF ANSWER]", "**Final answer**", "That is all"]),
        "mixed": rng.choice(["**Final answer 最终答案**", "【END】回答结束"]),
    }[lang]
    ends = ["", ".", "!", "。", "：", " -", "...", "!!"]
    gap = "\n\n" if sep == "blank" else "\n"
    lines = [marker + rng.choice(ends) + gap for _ in range(80)]
    return _loop_case(
        "marker_lines", rng, lang, channel, "".join(lines), len(lines[0]), width(lines[0])
    )


# what a request that names no count is answered with: a template counting on to the budget
_COUNTED: dict[str, tuple[str, str, str]] = {
    # name: (the request in en, in zh, the template's head)
    "ladder": (
        "Write a Python function that returns the nth Fibonacci number.",
        "用 Python 写一个返回第 n 个斐波那契数的函数。",
        "```python\ndef fib(n):\n    if n < 2:\n        return n\n",
    ),
    "rows": (
        "Give me some sample user records as JSON.",
        "给我一些 JSON 格式的示例用户数据。",
        "```json\n[\n",
    ),
}


def counted(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A template equal but for a counting number, on and on, when the request asked for no
    count: the copies past ``countedMaxItems`` (40) are the loop."""
    name = rng.choice(sorted(_COUNTED))
    en, zh, head = _COUNTED[name]
    request = zh if lang == "zh" else en
    if name == "ladder":
        items = [f"    elif n == {i}:\n        return {i}\n" for i in range(2, 160)]
    else:
        fields = {
            "zh": '"名称": "用户", "状态": "正常"',
            "en": '"name": "user", "active": true',
            "mixed": '"name": "用户", "active": true',
        }[lang]
        items = [f'  {{"id": {i}, {fields}}},\n' for i in range(1, 160)]
    # the rule counts copies from the first that equals the next; one item of slack
    pre = preamble(rng, lang, channel) + head + "".join(items[:40])
    return _loop_case(
        "counted",
        rng,
        lang,
        channel,
        "".join(items[40:]),
        len(items[40]),
        width(items[40]),
        request=request,
        pre=pre,
    )


_REWORK_CONNECTORS = {
    "en": ["Let me redo it.", "Let me work it out once more.", "Wait, let me recompute that."],
    "zh": ["等等，再算一遍。", "我再重新整理一下。", "再验证一次这个结果。"],
}


def _rework_lines(rng: random.Random, lang: str) -> tuple[list[list[str]], list[list[str]]]:
    """A derivation's groups of formula lines, and its closing lines each said one of two
    ways."""
    a, b, c, d = rng.randint(3, 19), rng.randint(11, 49), rng.randint(5, 95), rng.randint(2, 9)
    total = a * b + c
    rate = round(total / d, 2)
    if lang == "zh":
        groups = [
            [f"总价 = {a} × {b} = {a * b}", f"加上运费：{a * b} + {c} = {total}"],
            [f"每人分摊 = {total} / {d} = {rate}"],
            [f"检查：{rate} × {d} ≈ {total}，单价{b}没有变"],
        ]
        closing = [
            [f"验算：{a * b} + {c} = {total} ✓", f"反过来验证：{total} − {c} = {a * b} ✓"],
            [f"所以每人应付{rate}元。", f"答案是每人{rate}元。"],
        ]
    else:
        groups = [
            [f"cost = {a} × {b} = {a * b}", f"with shipping: {a * b} + {c} = {total}"],
            [f"per person = {total} / {d} = {rate}"],
            [f"Check: {rate} × {d} ≈ {total}, and the unit price {b} is unchanged"],
        ]
        closing = [
            [f"Verify: {a * b} + {c} = {total} ✓", f"Cross-check: {total} − {c} = {a * b} ✓"],
            [f"So each person pays {rate}.", f"The answer is {rate} per person."],
        ]
    return groups, closing


def reworked(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A derivation worked out again and again from the same lines: each copy after a
    connector line drawn from a few, its groups of formula lines word for word in an order that
    shifts from copy to copy, its check and its result each said one of two ways."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    groups, closing = _rework_lines(rng, base)
    orders = [list(range(len(groups)))]
    while len(orders) < 8:
        order = orders[-1][:]
        while order == orders[-1]:
            rng.shuffle(order)
        orders.append(order)
    return _derivation_loop("reworked", rng, lang, sep, channel, base, groups, closing, orders)


def rederived(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A derivation worked out again and again in its own order: each copy after a connector
    line drawn from a few, its formula lines word for word, its check and its result each said
    one of two ways. No period (the connector and the closing lines change), and no new order
    either."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    groups, closing = _rework_lines(rng, base)
    orders = [list(range(len(groups)))] * 8
    return _derivation_loop("rederived", rng, lang, sep, channel, base, groups, closing, orders)


def _derivation_loop(
    shape: str,
    rng: random.Random,
    lang: str,
    sep: str,
    channel: str,
    base: str,
    groups: list[list[str]],
    closing: list[list[str]],
    orders: list[list[int]],
) -> Case:
    """One copy of the derivation for each order of its groups, a connector line before each
    copy but the first, its closing lines the first way in the first copy."""
    gap = "\n\n" if sep in ("blank", "random") else "\n"

    def copy(order: list[int], first: bool) -> str:
        lines = [line for k in order for line in groups[k]]
        lines += [pick[0] if first else rng.choice(pick) for pick in closing]
        return "\n".join(lines) + "\n"

    copies = [copy(orders[0], True)]
    for order in orders[1:]:
        copies.append(gap + rng.choice(_REWORK_CONNECTORS[base]) + "\n" + copy(order, False))
    body = "".join(copies)
    first = len(copies[0])
    # the connector line before the second copy is between the copies: a cut may keep it
    second = first + len(copies[1]) - len(_copy_body(copies[1]))
    return _loop_case(
        shape,
        rng,
        lang,
        channel,
        body,
        first,
        width(copies[0]),
        second_copy=second,
        period=len(body) // len(copies),
    )


_RESTATE_CONNECTORS = {
    "en": ["In other words,", "That is,", "Put simply,", "Again,", "Once more,"],
    "zh": ["总之，", "也就是说，", "换句话说，", "简单来说，", "再强调一次，"],
}


def _restatable(rng: random.Random, lang: str) -> tuple[str, str]:
    """A long sentence with a slot for a hedge word after its subject (``{}``), and its end."""
    first, second = _distinct_sentences(rng, lang, 2)
    if lang == "zh":
        subject = next(s for s in _ZH_SUBJECTS if first.startswith(s))
        return subject + "{}" + first[len(subject) : -1] + "，这意味着" + second[:-1], "。"
    subject = next(s for s in _EN_SUBJECTS if first.lower().startswith(s))
    rest = first[len(subject) : -1] + ", which means " + second[0].lower() + second[1:-1]
    return subject[0].upper() + subject[1:] + " {}" + rest, "."


def restated(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """One sentence said again and again in other words: each copy opens with a connector
    drawn from a few and says its hedge word one of two or three ways (``usually``,
    ``often``), as a model that has run out of things to say restates its last point."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    template, end = _restatable(rng, base)
    hedges = rng.sample(_ZH_HEDGES if base == "zh" else _EN_HEDGES, rng.randint(2, 3))
    after = _joiner(rng, sep, base)
    first = template.format(hedges[0]) + end
    pieces = [first]
    for _ in range(9):
        connector = rng.choice(_RESTATE_CONNECTORS[base])
        said = template.format(rng.choice(hedges)) + end
        if base == "en":
            said = " " + said[0].lower() + said[1:]
        pieces.append(connector + said)
    joined = [piece + after(piece) for piece in pieces]
    return _loop_case(
        "restated",
        rng,
        lang,
        channel,
        "".join(joined),
        len(joined[0]),
        width(joined[1]),
        period=len(joined[1]),
    )


def _copy_body(copy: str) -> str:
    """A copy of ``reworked`` without the gap and connector line before it."""
    return copy.lstrip("\n").split("\n", 1)[1]


LOOPS: dict[str, Callable[[random.Random, str, str, str], Case]] = {
    "pool": pool,
    "opener_pool": opener_pool,
    "rotation": rotation,
    "sentence_cycle": sentence_cycle,
    "paragraph_blocks": paragraph_blocks,
    "short_block": short_block,
    "alternating": alternating,
    "numbered_item": numbered_item,
    "step_blocks": step_blocks,
    "short_lines": short_lines,
    "word_repeat": word_repeat,
    "code_lines": code_lines,
    "table_rows": table_rows,
    "table_rounds": table_rounds,
    "stuck_row": stuck_row,
    "overrun": overrun,
    "section_overrun": section_overrun,
    "counted": counted,
    "marker_lines": marker_lines,
    "drifting": drifting,
    "rechecked": rechecked,
    "reworked": reworked,
    "rederived": rederived,
    "restated": restated,
    "redefined_code": redefined_code,
    "retried": retried,
}


# -- healthy text -----------------------------------------------------------------------------
def _healthy(
    shape: str, rng: random.Random, lang: str, channel: str, body: str, request: str = ""
) -> Case:
    return Case(
        shape=shape, text=preamble(rng, lang, channel) + body, channel=channel, request=request
    )


def asked_list(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A numbered list the user asked for: a template that counts up to the asked end."""
    n = rng.choice((20, 30, 50))
    in_words = rng.random() < 0.5
    if lang == "zh":
        request = (
            f"请列出第1到第{n}个编号，每行一个。" if not in_words else f"请写出{n}个用户编号。"
        )
        item = "用户编号 {i}"
    else:
        request = (
            f"List the ids from 1 to {n}, one per line."
            if not in_words
            else (f"Give me {n} user ids, one per line.")
        )
        item = "user id {i}"
    body = "".join(f"{i}. {item.format(i=i)}\n" for i in range(1, n + 1))
    return _healthy("asked_list", rng, lang, channel, body, request)


def asked_sections(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A plan of the few days asked for, then numbered tips of its own (a small count bounds
    only the headings that name its word)."""
    count = rng.choice((2, 3, 4))
    request, blocks = _plan(rng, lang, count)
    tip = "第{i}条：提前预约门票。" if lang == "zh" else "Tip {i}: book the tickets early."
    tips = "".join(f"{i}. {tip.format(i=i)}\n" for i in range(1, rng.randint(8, 15)))
    return _healthy("asked_sections", rng, lang, channel, "".join(blocks[:count]) + tips, request)


def parallel_cases(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """Paragraphs that say the same of case after case but for their label and measurements:
    each reports something new, as a run of benchmarks or a trial of cases does."""
    para = _join_prose(_distinct_sentences(rng, lang, 4))
    gap = "\n" if sep == "newline" else "\n\n"
    zh = "。" in para
    out = []
    for i in range(1, 7):
        ms, mb, rows = rng.randint(10, 990), rng.randint(2, 64), rng.randint(100, 9000)
        label = f"情况{i}：" if zh else f"Case {i}: "
        took = (
            f"耗时{ms}毫秒，占用{mb}MB，返回{rows}行。"
            if zh
            else f" It took {ms} ms, used {mb} MB and returned {rows} rows."
        )
        out.append(label + para + took)
    return _healthy("parallel_cases", rng, lang, channel, gap.join(out) + gap)


def checked_cases(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """One sentence that checks case after case, no label to tell them apart: only its
    numbers, which change from case to case, say something new."""
    gap = "\n" if sep == "newline" else "\n\n"
    first = rng.randint(1, 9)
    if lang == "zh":
        frame = (
            "取n等于{n}，前{n}个奇数相加得到{sq}，它正好是{n}的平方，所以命题在这种情况下依然"
            "成立，接着检验下一个数。"
        )
    else:
        frame = (
            "Take n equal to {n}, and the first {n} odd numbers add up to {sq}, which is {n} "
            "squared again, so the claim holds in this case too and we go on to the next one."
        )
    out = [frame.format(n=n, sq=n * n) for n in range(first, first + 7)]
    return _healthy("checked_cases", rng, lang, channel, gap.join(out) + gap)


def openers(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """Long reasoning whose paragraphs keep opening with ``Wait,`` / ``等等，``."""
    opener = {"zh": "等等，", "en": "Wait, ", "mixed": rng.choice(("等等，", "Wait, "))}[lang]
    paras = []
    for _ in range(14):
        s = _distinct_sentences(rng, lang, rng.randint(2, 3))
        paras.append(opener + _join_prose(s))
    return _healthy("openers", rng, lang, channel, "\n\n".join(paras) + "\n")


def markdown(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """An answer with many short headings and bullets."""
    parts = []
    for i in range(12):
        parts.append(f"### {i + 1}. " + _sentence(rng, lang)[:14].rstrip("，。.,") + "\n")
        for s in _distinct_sentences(rng, lang, rng.randint(2, 4)):
            parts.append("- " + s + "\n")
        parts.append("\n")
    return _healthy("markdown", rng, lang, channel, "".join(parts))


def long_list(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A numbered list far longer than ``countedMaxItems`` that nobody counted for: each item
    says something new, so it is no template however long it runs."""
    items = _distinct_sentences(rng, lang, rng.randint(60, 90))
    body = "".join(f"{i}. {item}\n" for i, item in enumerate(items, 1))
    return _healthy("long_list", rng, lang, channel, body)


def table(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A table whose rows differ."""
    rows = ["| # | item | note |", "|---|---|---|"]
    for i in range(40):
        rows.append(f"| {i + 1} | {rng.choice(_EN_SUBJECTS)} | {_sentence(rng, lang)} |")
    return _healthy("table", rng, lang, channel, "\n".join(rows) + "\n")


def similar_code(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """Code with many similar lines (fields, a dispatch table)."""
    names = rng.sample(
        [
            "alpha",
            "beta",
            "gamma",
            "delta",
            "epsilon",
            "zeta",
            "eta",
            "theta",
            "iota",
            "kappa",
            "lambda_",
            "mu",
            "nu",
            "xi",
            "omicron",
            "pi",
            "rho",
            "sigma",
            "tau",
        ],
        16,
    )
    lines = ["```python", "class Settings:"]
    lines += [f"    {n}: int = {rng.randint(1, 999)}" for n in names]
    lines += ["", "HANDLERS = {"]
    lines += [f'    "{n}": handle_{n},' for n in names]
    lines += ["}", "```"]
    return _healthy("similar_code", rng, lang, channel, "\n".join(lines) + "\n")


def log(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A training log: the same line shape, numbers moving, a warning recurring."""
    lines = ["```"]
    loss = 2.5
    for step in range(1, 60):
        loss *= rng.uniform(0.95, 1.0)
        lines.append(f"step {step * 50} loss {loss:.4f} lr {0.001 * rng.uniform(0.5, 1):.6f}")
        if step % 7 == 0:
            lines.append("WARNING: gradient norm clipped")
    lines.append("```")
    return _healthy("log", rng, lang, channel, "\n".join(lines) + "\n")


_REFRAINS = {
    "zh": "啊，月光照在老屋的窗上，",
    "en": "And the river keeps on rolling home,",
}


def poem(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A song with a refrain after every verse."""
    base = "zh" if lang == "zh" else "en"
    refrain = _REFRAINS[base]
    refrain_lines = [
        refrain,
        refrain,
        ("我们一起唱到天亮。" if base == "zh" else "we sing until the morning light."),
    ]
    verses = []
    for _ in range(6):
        verse = [(_sentence(rng, base)) for _ in range(4)]
        verses.append("\n".join(verse) + "\n\n" + "\n".join(refrain_lines))
    return _healthy("poem", rng, lang, channel, "\n\n".join(verses) + "\n")


_CHORUS = {
    "zh": ["摇啊摇。", "顺着河流走。", "我们一起唱。", "月亮升起来。", "别放手。", "一直到天亮。"],
    "en": [
        "Row your boat.",
        "Down the stream.",
        "Merrily we go.",
        "Life is a dream.",
        "Sing it again.",
        "Hold on tight.",
    ],
}


def chorus(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A song whose chorus of four to six very short lines follows each of its two verses,
    and is sung once more at the end: a refrain, said three times in all."""
    base = "zh" if lang == "zh" else "en"
    lines = _CHORUS[base][: rng.randint(4, 6)]
    sung = "\n".join(lines) + "\n\n"
    verses = ["\n".join(_sentence(rng, base) for _ in range(2)) + "\n\n" for _ in range(2)]
    return _healthy("chorus", rng, lang, channel, verses[0] + sung + verses[1] + sung + sung)


_SONG_CHORUS = {
    "zh": [
        "我们是永不熄灭的灯火，",
        "我们是夜色写下的歌，",
        "坚持住，我们快到家了，",
        "这条路上没有人孤单。",
    ],
    "en": [
        "We are the lights that never fade,",
        "We are the songs the night has made,",
        "Hold on, hold on, we're almost home,",
        "No one walks this road alone.",
    ],
}


def song(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A song whose chorus of clause-long lines follows every verse and comes back once more
    at the end, back to back: four or five times in all, headed or not."""
    base = "zh" if lang == "zh" else "en"
    chorus = "\n".join(_SONG_CHORUS[base][: rng.randint(3, 4)]) + "\n\n"
    headed = rng.random() < 0.5
    head = ("【副歌】\n" if base == "zh" else "[Chorus]\n") if headed else ""
    parts = []
    for n in range(rng.randint(3, 4)):
        verse_head = (
            (f"【主歌{n + 1}】\n" if base == "zh" else f"[Verse {n + 1}]\n") if headed else ""
        )
        verse = "\n".join(_sentence(rng, base) for _ in range(rng.randint(2, 4)))
        parts.append(verse_head + verse + "\n\n" + head + chorus)
    parts.append(head + chorus)
    return _healthy("song", rng, lang, channel, "".join(parts))


def sql_poems(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """SQL seed rows whose string values hold poems with refrains."""
    base = "zh" if lang == "zh" else "en"
    refrain = _REFRAINS[base]
    rows = []
    for i in range(20):
        verse = _sentence(rng, base).replace("'", "''")
        rows.append(f"  ({i + 1}, 'poem {i + 1}', '{verse} {refrain} {refrain}'),")
    body = "```sql\nINSERT INTO poems (id, title, body) VALUES\n" + "\n".join(rows) + "\n```\n"
    return _healthy("sql_poems", rng, lang, channel, body, "Seed the poems table with 20 rows.")


def json_rows(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A JSON array of records that share their keys."""
    rows = []
    for i in range(30):
        rows.append(
            f'  {{"id": {i + 1}, "name": "{rng.choice(_EN_SUBJECTS)}", '
            f'"active": {rng.choice(["true", "false"])}, "score": {rng.randint(0, 100)}}},'
        )
    return _healthy(
        "json_rows", rng, lang, channel, "```json\n[\n" + "\n".join(rows) + "\n]\n```\n"
    )


def csv_rows(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """CSV with a recurring category column."""
    rows = ["id,city,category,amount"]
    for i in range(40):
        rows.append(
            f"{i + 1},{rng.choice(['Paris', 'Lyon', 'Nice'])},"
            f"{rng.choice(['food', 'rent'])},{rng.randint(1, 900)}"
        )
    return _healthy("csv_rows", rng, lang, channel, "```csv\n" + "\n".join(rows) + "\n```\n")


_READINGS = {
    "zh": [
        "队列长度：{v} 个任务",
        "下载进度：{v}%，请稍候",
        "当前温度 {v} 度，湿度正常",
        "延迟 {v} 毫秒，心跳正常",
        "第三个工作节点的队列长度为 {v} 个任务，所有消费者都在线",
    ],
    "en": [
        "Queue depth is {v} jobs",
        "Downloading layer: {v}% complete",
        "GPU 0: utilisation {v}%, memory normal",
        "heartbeat ok, latency {v} ms",
        "worker-3 queue depth is {v} messages, all consumers are healthy",
    ],
}


_STATUS = {"zh": ["正常。", "重试。", "已连接。"], "en": ["OK.", "Retrying.", "Connected."]}


def readings(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """Log lines that read one value again and again (a queue's depth, a latency): the line
    stays, its number rises and falls; now and then a timestamp in front, and in some logs a
    short status line after some of the readings (``OK.``, ``重试。``)."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    line = rng.choice(_READINGS[base])
    low, high = rng.choice(((0, 9), (1, 99), (100, 400)))
    stamped = rng.random() < 0.5
    status = rng.random() < 0.5
    minute = rng.randint(0, 20)
    lines = []
    for _ in range(rng.randint(25, 70)):
        minute += rng.randint(1, 3)
        stamp = f"[{minute // 60:02d}:{minute % 60:02d}] " if stamped else ""
        lines.append(stamp + line.format(v=rng.randint(low, high)))
        if status and rng.random() < 0.4:
            lines.append(stamp + rng.choice(_STATUS[base]))
    return _healthy("readings", rng, lang, channel, "\n".join(lines) + "\n")


def countdown(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A countdown, one line a step: the same line, its number counting down by one."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    line = "倒计时 {n} 秒，请做好准备。" if base == "zh" else "T-minus {n} seconds and holding."
    start = rng.randint(25, 60)
    body = "".join(line.format(n=n) + "\n" for n in range(start, 0, -1))
    return _healthy("countdown", rng, lang, channel, body)


def answer_key(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """An answer key or a schedule: labels that count up by one, each over one of a handful of
    short answers (``Statement 12: true.``, ``Q7: B``, ``第7题：对。``, ``Day 3: Rest``)."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    if base == "zh":
        label, answers = rng.choice(
            (("第{n}题：", ["对。", "错。"]), ("第{n}天：", ["休息", "跑步"]))
        )
    else:
        label, answers = rng.choice(
            (
                ("Statement {n}: ", ["true.", "false."]),
                ("Q{n}: ", ["A", "B", "C", "D"]),
                ("Day {n}: ", ["Rest", "Run", "Stretch"]),
            )
        )
    count = rng.randint(30, 60)
    body = "".join(label.format(n=n) + rng.choice(answers) + "\n" for n in range(1, count + 1))
    return _healthy("answer_key", rng, lang, channel, body)


def zero_table(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """Code that writes out equal rows (a table of zeros, an initialiser), in a fence."""
    size = rng.choice((8, 12, 16))
    row = "    {" + ", ".join(["0"] * size) + "},"
    body = f"```c\nint grid[{size}][{size}] = {{\n" + "\n".join([row] * size) + "\n};\n```\n"
    return _healthy("zero_table", rng, lang, channel, body)


_NAMES = {
    "en": ["Ann", "Bruno", "Chen Wei", "Dara", "Emeka", "Farah", "Gus"],
    "zh": ["王芳", "李强", "陈伟", "赵敏", "刘洋", "孙丽", "周杰"],
}


def letters(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """One letter sent to four to six people, each under their own salutation: its lines come
    back word for word, in the same order every time."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    body = [_sentence(rng, base) for _ in range(rng.randint(3, 5))]
    sign = "此致敬礼，项目组" if base == "zh" else "Best regards, the project team"
    gap = "\n" if sep == "newline" else "\n\n"
    out = []
    for name in rng.sample(_NAMES[base], rng.randint(4, 6)):
        hello = f"{name}，你好：" if base == "zh" else f"Dear {name},"
        out.append(hello + gap + gap.join(body) + gap + sign + "\n")
    return _healthy("letters", rng, lang, channel, ("---" + gap).join(out))


def revisits(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A problem of four to six parts, each worked from the same two formula lines said again
    word for word, then its own numbers: a derivation going back to its formulas."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    if base == "zh":
        shared = ["由公式 v² = u² + 2as 可得", "所以 s = (v² − u²) / (2a)"]
        part = "第{k}问：初速度 u = {u} m/s，加速度 a = {a} m/s²，末速度为零"
        result = "代入得 s = {u2} / {a2} = {s} m"
    else:
        shared = ["From v² = u² + 2as we get", "so s = (v² − u²) / (2a)"]
        part = "Part {k}: u = {u} m/s, a = {a} m/s², and the car comes to rest"
        result = "Substituting, s = {u2} / {a2} = {s} m"
    out = []
    for k in range(1, rng.randint(4, 6) + 1):
        u, a = rng.randint(10, 40), rng.randint(2, 9)
        lines = [part.format(k=k, u=u, a=a), *shared]
        lines.append(result.format(u2=u * u, a2=2 * a, s=round(u * u / (2 * a), 2)))
        out.append("\n".join(lines) + "\n")
    gap = "\n" if sep == "newline" else "\n\n"
    return _healthy("revisits", rng, lang, channel, gap.join(out))


_DAYS = {
    "en": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "zh": ["周一", "周二", "周三", "周四", "周五", "周六", "周日"],
}


def routine(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A week's plan that gives every day the same routine under the day's own label: one
    sentence said word for word seven times, each an item of the plan."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    said = _join_prose(_distinct_sentences(rng, base, 1))
    mark = "：" if base == "zh" else ": "
    gap = "\n\n" if sep == "blank" else "\n"
    body = gap.join(day + mark + said for day in _DAYS[base]) + "\n"
    return _healthy("routine", rng, lang, channel, body)


_PLACES = {
    "en": ["Linux", "macOS", "Windows", "FreeBSD", "Alpine", "Debian", "Fedora"],
    "zh": ["北京", "上海", "广州", "深圳", "杭州", "成都", "武汉"],
}


def alike_items(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """Sentences alike but for the thing each names (the build passes on Linux, on macOS,
    ...): a list written as prose in one paragraph, each sentence saying something new. (One
    such sentence a line is no case here: ``drift`` takes three lines a name apart for a
    paragraph said again with a word swapped, as it must for ``slim``, ``sleek``,
    ``compact``.)"""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    tail = _sentence(rng, base)
    if base == "zh":
        said = "在{}的机器上测试全部通过，" + tail
    else:
        said = "On {}, every test passes and " + tail[0].lower() + tail[1:]
    pieces = [said.format(place) for place in _PLACES[base]]
    body = _weave(rng, pieces, "space" if sep in ("newline", "blank", "random") else sep, base)
    return _healthy("alike_items", rng, lang, channel, body.rstrip() + "\n")


_NUMBER_NAMES = ["Seven", "Six", "Five", "Four", "Three", "Two", "One"]


def counting_song(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A counting song: each verse the last with its number one less (``Five paper boats``,
    ``Four paper boats``; ``第五只小船``), its middle line the same every time."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    verses = []
    for k, name in enumerate(_NUMBER_NAMES[:-1]):
        if base == "zh":
            n, m = "七六五四三二一"[k], "七六五四三二一"[k + 1]
            lines = [
                f"第{n}只纸船顺着小河慢慢地漂向远方，",
                "如果有一只纸船在河湾那里转了弯，",
                f"就只剩下第{m}只纸船顺着小河慢慢地漂。",
            ]
        else:
            lines = [
                f"{name} paper boats a-sailing down the stream,",
                "And if one paper boat should drift around the bend,",
                f"There'll be {_NUMBER_NAMES[k + 1].lower()} paper boat"
                + ("" if k + 1 == len(_NUMBER_NAMES) - 1 else "s")
                + " a-sailing down the stream.",
            ]
        verses.append("\n".join(lines))
    return _healthy("counting_song", rng, lang, channel, "\n\n".join(verses) + "\n")


def methods_alike(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """One method written alike in several classes, and a helper alike inside several
    functions, in one fence: each is a definition of its own."""
    classes = rng.sample(["Cart", "Order", "Invoice", "Refund", "Coupon", "Basket"], 4)
    lines = ["```python"]
    for name in classes:
        lines += [
            f"class {name}(Base):",
            "    def __init__(self):",
            "        super().__init__()",
            "        self.items = []",
            "",
            "    def total(self):",
            "        return sum(item.price for item in self.items)",
            "",
        ]
    for n in range(1, 5):
        lines += [
            f"def task_{n}(func):",
            "    def inner(x):",
            "        return func(x) + 1",
            "    return inner",
            "",
        ]
    lines.append("```")
    return _healthy("methods_alike", rng, lang, channel, "\n".join(lines) + "\n")


def snippet_sections(rng: random.Random, lang: str, sep: str, channel: str) -> Case:
    """A guide whose every section ends with the same snippet (open the environment, install),
    a paragraph of its own before it."""
    base = rng.choice(("zh", "en")) if lang == "mixed" else lang
    head = "步骤" if base == "zh" else "Step"
    snippet = "```bash\nsource .venv/bin/activate\npip install -e .\n```\n"
    sections = []
    for n in range(1, 5):
        prose = _join_prose(_distinct_sentences(rng, base, 4))
        sections.append(f"## {head} {n}\n\n{prose}\n\n{snippet}")
    return _healthy("snippet_sections", rng, lang, channel, "\n".join(sections))


HEALTHY: dict[str, Callable[[random.Random, str, str, str], Case]] = {
    "asked_list": asked_list,
    "asked_sections": asked_sections,
    "openers": openers,
    "markdown": markdown,
    "long_list": long_list,
    "table": table,
    "similar_code": similar_code,
    "log": log,
    "poem": poem,
    "chorus": chorus,
    "song": song,
    "sql_poems": sql_poems,
    "json_rows": json_rows,
    "csv_rows": csv_rows,
    "readings": readings,
    "countdown": countdown,
    "zero_table": zero_table,
    "answer_key": answer_key,
    "parallel_cases": parallel_cases,
    "checked_cases": checked_cases,
    "letters": letters,
    "revisits": revisits,
    "routine": routine,
    "alike_items": alike_items,
    "counting_song": counting_song,
    "methods_alike": methods_alike,
    "snippet_sections": snippet_sections,
}


def make(shape: str, seed: int, lang: str, sep: str, channel: str) -> Case:
    rng = random.Random(f"{shape}/{seed}/{lang}/{sep}/{channel}")
    maker = LOOPS.get(shape) or HEALTHY[shape]
    return maker(rng, lang, sep, channel)
