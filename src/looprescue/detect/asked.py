"""The numbered range a request asks for: "the numbers from 1 to 50", "task_1 到 task_10",
or a count of items, in digits or in words: "50 user ids", "ten stubs", "写出30个编号" (the
items 1 to N). A count is one the sentence asks for ("give me 10 tips"); one it describes
("a team of 6 engineers", "a party for 20 guests", "Java 8 features") bounds nothing.

A small count (two to four) of sections is kept apart with the words that may name them
(``asked_sections``: "a 3-day trip", "三天的行程"): it bounds only headings that name them.

A counted list's text cannot say where it should stop; only the request can. The ``overrun``
rule (``rules/overrun.py``) reads the ranges found here to tell a list the user asked for from
one that counts on past it.
"""

from __future__ import annotations

import re
from typing import Final

# Ranges of fewer items bound no list worth watching ("1-2 paragraphs", "3-5 examples"): a
# model that writes a few more items than asked is not stuck.
MIN_ASKED_ITEMS: Final = 5
MAX_ASKED: Final = 100_000
# A count above this is a year or a size ("in 2024", "2048 tokens"), not items to list.
MAX_COUNT: Final = 1000

# start and end with the same name in front of both ("task_1 to task_10", ".row-1 through
# .row-40"), or none; the end is a whole number (not a date's month, not a version's part).
# A CJK char next to a number is no part of it: Chinese writes no space there ("打印1到12的数字").
_WORD_CHAR: Final = r"[^\W\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]"
_RANGE: Final = re.compile(
    rf"(?<!{_WORD_CHAR})(?<!\.)(?P<name>[A-Za-z_.\-]{{0,24}}?)(?P<start>\d{{1,6}})\s*"
    r"(?:to|through|thru|until|-|–|—|~|～|到|至)\s*"
    rf"(?P=name)(?P<end>\d{{1,6}})(?![\d.]\d|{_WORD_CHAR})",
    re.IGNORECASE,
)


_EN_NUMBERS: Final = {
    "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
    "twelve": 12, "dozen": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40,
    "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
}  # fmt: skip
# Small counts, asked for sections only (``asked_sections``).
_EN_SMALL: Final = {"two": 2, "three": 3, "four": 4}
_ZH_DIGITS: Final = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
                     "八": 8, "九": 9}  # fmt: skip
# A count of things: a number, then the things counted (not a range's "to", a unit's "of",
# a decimal or a date). "50 user ids", "ten stubs", "a hundred rows".
_EN_COUNT: Final = re.compile(
    r"(?<![\w.,:/-])(?P<n>\d{1,6}|" + "|".join(_EN_NUMBERS) + r")(?![\w.,:/-])\s+"
    r"(?!(?:to|through|thru|until|and|or|of|in|at|by|per|times|x|percent|from)\b)"
    # a length or a duration is no list ("in 100 words", "5 minutes")
    r"(?!(?:words?|char(?:acter)?s?|tokens?|letters?|sentences?|paragraphs?|pages?|bytes?"
    r"|minutes?|seconds?|hours?|years?|px)\b)"
    r"(?:[a-z][\w-]*\s+)?[a-z][\w-]*",
    re.IGNORECASE,
)
# 30个, 二十条, 一百行, 10章, 21天: a Chinese count and its measure word, items a list is made
# of (a plan's days and weeks, as "30 days" is in English). An ordinal (第30天) is no count.
_ZH_COUNT: Final = re.compile(
    r"(?<![\d.第])(?P<n>\d{1,6}|[一两二三四五六七八九]?十[一二三四五六七八九]?|[一两二三四五六七八九]百)"
    r"\s*[个条行项份道种句首位名段篇则组张章节课集回讲题步关幕天周]"
)


def zh_number(text: str) -> int:
    """The value of a number in digits or in Chinese words up to 999 (四, 十一, 二十, 一百)."""
    if text.isdigit():
        return int(text)
    if text.endswith("百"):
        return 100 * _ZH_DIGITS[text[0]]
    tens, ten, ones = text.partition("十")
    if not ten:
        return _ZH_DIGITS[text]
    return 10 * (_ZH_DIGITS[tens] if tens else 1) + (_ZH_DIGITS[ones] if ones else 0)


# A number right after a word with a capital letter in it is part of a name ("Java 8
# features", "Windows 10 tips", "iPhone 15 cases", "Chapter 12 themes"), no count, unless that
# word opens its sentence ("List 50 states") or ranks the items ("the Top 10 films").
_RANKING: Final = frozenset({"top", "best", "first", "last", "next", "only", "all"})
_SENTENCE_ENDS: Final = ".!?:;\n。！？：；"


def _names_a_version(text: str, at: int) -> bool:
    """Whether the number at ``at`` follows a name (``Java 8``): a version, no count."""
    head = text[max(0, at - 64) : at].rstrip(" \t")
    words = head.split()
    if not words or not any(c.isupper() for c in words[-1]):
        return False
    word = words[-1]
    if word.strip("\"'(“”‘’*").lower() in _RANKING:
        return False
    before = head[: len(head) - len(word)].rstrip(" \t")
    return bool(before) and before[-1] not in _SENTENCE_ENDS


# A count is asked for when its sentence asks for something to be written: "give me 10 tips",
# "I want 30 names", "what are ten good names"; "I have 6 engineers", "a party for 20 guests"
# describe, and a list the answer writes for them is as long as it needs to be.
_EN_ASKING: Final = re.compile(
    r"\b(?:give|list|write|name|suggest|generate|create|provide|show|make|recommend|want|need"
    r"|share|tell|find|draft|produce|print|output|return|compose|prepare|brainstorm|come up"
    r"|think of|add|build|design|plan|outline|seed|insert|fill|populate|what|which)\b",
    re.IGNORECASE,
)
_ZH_ASKING: Final = re.compile(
    r"写|列|给|帮|生成|提供|推荐|出|编|设计|想|起|取|举|说|做|建|插入|制定|规划|安排|准备|整理|总结"
    r"|造|来|要|哪|什么"
)
_FOR_WHOM: Final = re.compile(r"\b(?:for|serves|feeds|has|have|had)\s*$", re.IGNORECASE)
# where a sentence begins: its count is asked for only by words after this
_CLAUSE_END: Final = re.compile(r"[.!?;\n。！？；]")


def _clause_before(text: str, at: int) -> str:
    """The text of the sentence before ``at``."""
    head = text[max(0, at - 120) : at]
    ends = list(_CLAUSE_END.finditer(head))
    return head[ends[-1].end() :] if ends else head


def _asks(clause: str) -> bool:
    """Whether the sentence before a count asks for its items: the count opens it ("10 tips
    for sleep"), or a word that asks comes before it, and no "for" right before it ("a party
    for 20 guests" is for whom, not how many)."""
    head = clause.strip()
    if not head:
        return True
    return _EN_ASKING.search(head) is not None and not _FOR_WHOM.search(head)


def _counts(text: str) -> list[int]:
    found = []
    for match in _EN_COUNT.finditer(text):
        at = match.start()
        clause = _clause_before(text, at)
        if _names_a_version(text, at) or not _asks(clause):
            continue
        n = match["n"].lower()
        found.append(int(n) if n.isdigit() else _EN_NUMBERS[n])
    for match in _ZH_COUNT.finditer(text):
        clause = _clause_before(text, match.start()).strip()
        if not clause or _ZH_ASKING.search(clause):
            found.append(zh_number(match["n"]))
    return found


# Bounded by ASCII letters and digits only: Chinese writes a number right against the words
# around it (写21天的计划), and those are word chars to ``\w``.
_ANY_NUMBER: Final = re.compile(
    r"(?<![0-9A-Za-z_.])(?:\d{1,6}|" + "|".join(_EN_NUMBERS) + r")(?![0-9A-Za-z_]|\.\d)",
    re.IGNORECASE,
)


def largest_count(text: str) -> int:
    """The largest count ``text`` could be asking for: any whole number it names, in digits or
    in words, up to :data:`MAX_COUNT` (above that it is a year or a size), and the ends of the
    ranges it names. 0 when it names none. A list the request might have asked for is never
    judged shorter than this (``rules/counted.py``)."""
    found = [
        n
        for word in _ANY_NUMBER.findall(text)
        if (n := int(word) if word.isdigit() else _EN_NUMBERS[word.lower()]) <= MAX_COUNT
    ]
    found.extend(zh_number(match["n"]) for match in _ZH_COUNT.finditer(text))
    found.extend(last for _, last in asked_ranges(text))
    return max(found, default=0)


# A small count of sections: "3 days", "three recipes", "a 3-day trip", "3天". Only headings
# named by the counted word are held to it (``asked_sections``). A word that goes on with a
# hyphen is part of a compound ("3 step-by-step guides"), no name of the sections.
_EN_SMALL_COUNT: Final = re.compile(
    r"(?<![\w.,:/-])(?P<n>[234]|two|three|four)(?:\s+|-)(?P<word>[a-z]+(?![\w-]))(?:\s+(?P<next>[a-z]+(?![\w-])))?",
    re.IGNORECASE,
)
# the measure words that name a section of their own (a day, a week, a chapter); a general
# one (个, 份) says nothing of what the sections are called
_ZH_SECTION_WORDS: Final = "天周章节课集回讲步关幕篇"
_ZH_SMALL_COUNT: Final = re.compile(
    r"(?<![\d.第])(?P<n>[234两二三四])\s*(?P<unit>[" + _ZH_SECTION_WORDS + r"])"
)
# words that follow a count without naming what is counted
_NOT_UNITS: Final = frozenset(
    {"and", "for", "from", "the", "with", "about", "into", "more", "times", "percent"}
)


def asked_sections(text: str) -> tuple[tuple[int, str], ...]:
    """The small counts of sections ``text`` asks for, with the words that may name them
    (the one after the count, and the one after that: "3 sample orders"): "plan 3 days in
    Rome" gives (3, "day"), "a 3-day trip" (3, "day") and (3, "trip"), "三天的行程" and "3天"
    (3, "天").
    Fewer than ``MIN_ASKED_ITEMS`` items bound no list (a model that writes six tips for
    three is not stuck), but a plan of three days whose headings run on to ``Day 46`` is: the
    ``overrun`` rule holds only headings that name the word to such a count. A count the
    sentence describes ("I have 3 weeks") asks for nothing, as in ``asked_ranges``."""
    found: list[tuple[int, str]] = []
    for match in _EN_SMALL_COUNT.finditer(text):
        at = match.start()
        if _names_a_version(text, at) or not _asks(_clause_before(text, at)):
            continue
        n = match["n"].lower()
        count = int(n) if n.isdigit() else _EN_SMALL[n]
        for word in (match["word"], match["next"]):
            # (a word's plural names the same sections: "days" are headed "Day 2")
            if word and len(word) >= 3 and word.lower() not in _NOT_UNITS:
                found.append((count, word.lower().removesuffix("s")))
    for match in _ZH_SMALL_COUNT.finditer(text):
        clause = _clause_before(text, match.start()).strip()
        if not clause or _ZH_ASKING.search(clause):
            n = match["n"]
            found.append((zh_number(n), match["unit"]))
    return tuple(found)


def asked_ranges(text: str) -> tuple[tuple[int, int], ...]:
    """The numbered ranges ``text`` asks for, as (first, last) pairs, in order: the ranges
    it names, then the counts it asks for (``50 user ids``: 1 to 50)."""
    found = []
    ranges = list(_RANGE.finditer(text))
    for match in ranges:
        start, end = int(match["start"]), int(match["end"])
        if end - start + 1 >= MIN_ASKED_ITEMS and end <= MAX_ASKED:
            found.append((start, end))
    if not ranges:  # a named range says what the count is about
        found.extend((1, n) for n in _counts(text) if MIN_ASKED_ITEMS <= n <= MAX_COUNT)
    return tuple(found)
