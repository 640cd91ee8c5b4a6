"""Small text helpers shared by the detector rules: masking, phrase normalisation, line kinds."""

from __future__ import annotations

import re
from enum import Enum
from typing import Final

# Digits are masked to "0" one for one, so offsets in the masked view equal offsets in the raw
# text and a counter loop (``Step 12: …``, ``Step 13: …``) becomes an exact cycle there.
# (A regex, not str.translate: translate takes a slow path on text with CJK in it.)
_NONZERO_DIGIT: Final = re.compile("[1-9]")


def mask_digits(text: str) -> str:
    return _NONZERO_DIGIT.sub("0", text)


# A Chinese full stop / ！？ always ends a sentence; an English .!? only before whitespace, so
# "3.5", "e.g.x" and file names do not split. A newline always ends a sentence and a line.
# Written as one char class first: the regex engine then skips to the next candidate char in a
# tight loop, where a leading alternation tries every branch at every position (3x slower).
SENTENCE_END: Final = re.compile(r"[.!?。！？\ufffd\n](?:(?<=[。！？\ufffd\n])|(?=\s))")
# The chars a SENTENCE_END match begins with (text without any ends no sentence).
SENTENCE_END_CHARS: Final = frozenset("。！？\ufffd.!?\n")


# (A marker may end what is read of its line: the kind is settled at the line's first sentence
# end, which for ``b. Twitter.`` is the marker itself.)
_LIST_ITEM: Final = re.compile(r"(?:[-*+•]\s|\d{1,4}[.)](?:\s|$)|[a-zA-Z][.)](?:\s|$)|\[[ xX]\]\s)")
_PUNCT: Final = ".。!！?？,，;；:：、…\"'`“”‘’()（）[]【】*_~-\ufffd"


# Stands in for a sentence too long to be a phrase: it is judged by its length alone.
LONG_SENTENCE: Final = "x" * 256
# Stands in for a line of structure (a list item, a table row, a quote, a line of code) that
# the phrase and line rules do not count: it still comes between their units, so a run of
# short units it interrupts is no longer back to back.
STRUCTURE_LINE: Final = "\x00structure"


# What a label line ends with: a few words and a colon or a comma (``Dear Ann,``, ``Day 2:``,
# ``佳美的正文：``, ``王芳，你好：``); the text under it is an item of its own.
LABEL_ENDS: Final = ":：,，"


class LineKind(Enum):
    PROSE = "prose"
    LIST_ITEM = "list"
    TABLE_ROW = "table"
    QUOTE = "quote"
    FENCE = "fence"  # a ``` line itself
    SYMBOLS = "symbols"  # no letter or digit at all: |---|, }, ----
    BLANK = "blank"


def classify_line(stripped: str) -> LineKind:
    """Kind of a line, given the line with surrounding whitespace removed."""
    if not stripped:
        return LineKind.BLANK
    if stripped.startswith("```") or stripped.startswith("~~~"):
        return LineKind.FENCE
    if not has_alnum(stripped):
        return LineKind.SYMBOLS
    first = stripped[0]
    if first == "|":
        return LineKind.TABLE_ROW
    if first == ">":
        return LineKind.QUOTE
    if _LIST_ITEM.match(stripped):
        return LineKind.LIST_ITEM
    return LineKind.PROSE


# A counter label in front of a phrase: "Day 3: ", "Week 12 - ", "Step 4) ", and in brackets
# "[check 6] " (its opening bracket is stripped as punctuation before the label is looked for).
_COUNTER_LABEL: Final = re.compile(r"[^\W\d_]{1,12}[ \t]*[0-9]{1,4}[ \t]*[:.)\]】-][ \t]+")


def counter_label(sentence: str) -> int | None:
    """The number of the counter label a sentence opens with (``Day 3: Rest`` -> 3), if any:
    the label ``normalize_phrase`` drops."""
    text = sentence.strip().strip(_PUNCT)
    label = _COUNTER_LABEL.match(text)
    if label is None:
        return None
    digits = "".join(c for c in label.group() if c.isdigit())
    return int(digits)


def normalize_phrase(sentence: str) -> str:
    """Canonical form of a short sentence for phrase-pool counting ("OK." == "ok"): inner
    whitespace is one space, and a counter label in front is dropped ("Day 3: Rest" ==
    "Day 12: rest"), so a labelled list whose items come from a handful can be a pool."""
    # Strip runs of whitespace and punctuation from both ends (str.strip works in C; two
    # passes suffice unless whitespace and punctuation alternate).
    text = sentence.strip().strip(_PUNCT)
    while text and (text[0].isspace() or text[-1].isspace()):
        text = text.strip().strip(_PUNCT)
    if "  " in text or "\n" in text or "\t" in text:
        text = " ".join(text.split())
    label = _COUNTER_LABEL.match(text)
    if label:
        text = text[label.end() :].strip(_PUNCT)
    return text.casefold()


# Marks of a formula or of code, never of the words a phrase pool or a run of short lines is
# made of (``Now.``, ``好。``, ``Let me write.``, ``**Final answer**``).
_NOTATION: Final = re.compile(r"[=+^<>|{}\\∩∪≤≥≠±×÷√∑∫→←⇒]")


# Code quoted inside a line of prose, in backticks (`` `<React.StrictMode>` ``, `` `a = b` ``).
_INLINE_CODE: Final = re.compile(r"`[^`\n]+`")


def unquoted(line: str) -> str:
    """``line`` with the code it quotes in backticks left out: prose that names a tag or a
    call in backticks is still prose, and its marks are the quoted code's, not its own."""
    return _INLINE_CODE.sub(" ", line) if "`" in line else line


# LaTeX that frames what it holds without being a formula: ``\boxed{1}`` marks a final answer,
# ``\(...\)`` sets inline math. What is inside counts; the frame does not.
_LATEX_FRAME: Final = re.compile(r"\\(?:boxed|text|textbf|mathbf|mathrm)\{([^{}]*)\}|\\[()\[\]]")


def notation(text: str) -> bool:
    """Whether a short unit is a formula or a line of code (``a + 4d = 448``, ``x -> x + 1``):
    no phrase of a pool, and no line of a run of short lines. A final answer framed in LaTeX,
    ``\\boxed{1}``, is a phrase like ``Final answer: 1``; ``\\boxed{x = 1}`` is a formula."""
    if "\\" in text:
        text = _LATEX_FRAME.sub(r"\1", text)
    return _NOTATION.search(text) is not None


def notation_marks(text: str) -> int:
    """How many formula or code marks ``text`` holds (``notation``'s)."""
    return len(_NOTATION.findall(text))


# What the rules that compare sentences and paragraphs word by word read as a token: a word, a
# number or a CJK char; marks and spaces are left out (a changed comma is no new content).
TOKEN: Final = re.compile(
    r"[A-Za-z\u00c0-\u024f]+|[0-9]+(?:\.[0-9]+)?|[\u3040-\u30ff\u4e00-\u9fff]"
)


# A number as a text says it: digits, a Chinese ordinal (``第四``), or an English count word
# from two up (``one`` and ``a`` say the same too often to tell copies apart by them), read as
# its digits (``thirty minutes`` says what ``30 minutes`` does).
# fmt: off
_COUNT_WORDS: Final = {
    "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8",
    "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13",
    "fourteen": "14", "fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18",
    "nineteen": "19", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50",
    "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90", "hundred": "100",
    "thousand": "1000", "million": "1000000",
}
# fmt: on
_COUNT_WORD_SET: Final = frozenset(_COUNT_WORDS)
_DIGITS_SAID: Final = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_ORDINAL_SAID: Final = re.compile(r"第[0-9零〇一二三四五六七八九十百千两]+")
_WORD_SAID: Final = re.compile(r"[a-z]+")


def numbers_said(text: str) -> list[str]:
    """The numbers ``text`` says, each as often as it says it (digits first, then count words
    as digits, then ordinals): a copy that says other numbers says something new (a count, a
    verse of a counting song: ``Four paper boats`` after ``Five``, ``第四只``)."""
    numbers = _DIGITS_SAID.findall(text)
    for word in _WORD_SAID.findall(text.lower()):
        value = _COUNT_WORDS.get(word)
        if value is not None:
            numbers.append(value)
    if "第" in text:
        numbers += _ORDINAL_SAID.findall(text)
    return numbers


def number_set(text: str, words: frozenset[str]) -> frozenset[str]:
    """The numbers ``text`` says, as ``numbers_said`` reads them, given its words in lower
    case (the cheap way for a rule that has read them already)."""
    numbers = set(_DIGITS_SAID.findall(text))
    for word in words & _COUNT_WORD_SET:
        numbers.add(_COUNT_WORDS[word])
    if "第" in text:
        numbers.update(_ORDINAL_SAID.findall(text))
    return frozenset(numbers)


_ALNUM: Final = re.compile(r"[^\W_]")  # a letter or digit in any script


def has_alnum(text: str) -> bool:
    # most text begins with a letter: answered without the regex
    return text[:1].isalnum() or _ALNUM.search(text) is not None


def excerpt(text: str, limit: int = 80) -> str:
    """One-line excerpt for evidence: newlines shown as ⏎, cut at ``limit`` chars."""
    flat = text.replace("\r", "").replace("\n", "⏎")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
