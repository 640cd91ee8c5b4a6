"""What a repeated unit looks like, as far as deciding whether its repetition is a loop.

A repeated unit is judged by its shape before its copies are counted: a divider repeated is
layout, a counter template in code is what the user asked for, one word repeated dozens of
times is a loop.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Final

from looprescue.detect.limits import CLAUSE_LETTERS
from looprescue.detect.text import LineKind, classify_line

# Characters that draw lines and borders: rules, table separators, box drawing, ellipses.
_DIVIDER: Final = re.compile(r"[\s\-=_*~+|:.·•…—–─-╿▀-▟■□▪▫◆◇○●]*")
_LETTER: Final = re.compile(r"[^\W\d_]")
_DIGIT: Final = re.compile(r"[0-9]")
_ONLY_DIGITS: Final = re.compile(r"[0-9\s]+")
# Sentence ends as the segmenter sees them, and line ends that do not just follow one.
# Whitespace after a sentence end is layout, as the folded view has it: ``x.\n\n`` is one
# sentence, not a sentence and a blank line, or a copy would change its shape with the blank
# lines after it.
_UNIT_END: Final = re.compile(r"[。！？]\s*|[.!?](?:\s+|$)|\n")
_CODE_LINE: Final = re.compile(
    r"""(?x)
    (?: [{};,(\[] | \):? | => | \)\s*\{ ) \s* $          # ends like a statement or a block
    | ^ \s* [}\])]                                       # closes a block
    | ^ \s* (?: def | class | function | fn | func | const | let | var | return | import
              | \#include | \#define | public | private | static | async | await
              | SELECT | INSERT | UPDATE | DELETE | CREATE | VALUES | WHERE ) \b
    | ^ \s* from \s+ [\w.]+ \s+ import \b                # not "from the 3rd day"
    | " [^"\n]* " \s* :                                  # a JSON key
    | ^ \s* [\w.$-]+ \s* [:=] \s* \S .* [;,]? \s* $      # key: value / name = value
    | </? [A-Za-z][\w-]* [^>]* >                         # a markup tag
    """
)
_NUMBER: Final = re.compile(r"[0-9]+")
_NUMBERED: Final = re.compile(r"[ \t]*[0-9]{1,6}[.)][ \t]+")
_LIST_MARK: Final = re.compile(r"(?m)^[ \t]*(?:[-*+•]|[0-9]{1,4}[.)]|[a-zA-Z][.)])[ \t]+")


class Content(Enum):
    LAYOUT = "layout"  # whitespace, rules, borders: repeating it is never a loop
    NUMERIC = "numeric"  # numbers with punctuation: data (a row of zeros, a table of numbers)
    DIGITS = "digits"  # digits alone: a chant of digits
    MARKS = "marks"  # punctuation that is not layout: "#", "//", "}"
    WORDS = "words"  # letters (any script)


def content_of(unit: str) -> Content:
    if _LETTER.search(unit):
        return Content.WORDS
    if _DIGIT.search(unit):
        return Content.DIGITS if _ONLY_DIGITS.fullmatch(unit) else Content.NUMERIC
    if _DIVIDER.fullmatch(unit):
        return Content.LAYOUT
    return Content.MARKS


def letters_in(unit: str) -> int:
    return len(_LETTER.findall(unit))


def is_letter(ch: str) -> bool:
    return _LETTER.match(ch) is not None


# A clause of words, as a stutter repeats it (rules ``stutter`` and ``cycle``): at least
# CLAUSE_LETTERS letters, and two words or more (or a script written without spaces). A word
# or a short cry said again (``very, very, very``, ``加油，加油``) is emphasis, not a stutter.
CLAUSE_MARKS: Final = "，,、；;"
CLAUSE_MARK: Final = re.compile(f"[{CLAUSE_MARKS}]")
CLAUSE_MARK_CHARS: Final = frozenset(CLAUSE_MARKS)
NO_SPACES_SCRIPT: Final = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
# runs of such chars: counted by the run, a Chinese sentence is a few matches, not one a char
_NO_SPACES_RUN: Final = re.compile(NO_SPACES_SCRIPT.pattern + "+")


def text_width(text: str) -> int:
    """Chars, with a char of a script written without spaces counted twice: one such char
    says about as much as two of an alphabet (a CJK sentence is half as long as its English
    translation), and costs a model one or two tokens where English costs a third of one."""
    if text.isascii():
        return len(text)  # (most text: nothing to count twice)
    return len(text) + sum(map(len, _NO_SPACES_RUN.findall(text)))


def char_widths(text: str) -> list[int]:
    """``text_width`` char by char."""
    return [2 if NO_SPACES_SCRIPT.match(char) else 1 for char in text]


def is_clause_of_words(body: str) -> bool:
    return letters_in(body) >= CLAUSE_LETTERS and (
        len(body.split()) >= 2 or NO_SPACES_SCRIPT.search(body) is not None
    )


def is_one_clause(unit: str) -> bool:
    """One clause of words with its mark: the unit of a stutter (any rotation of it)."""
    return len(CLAUSE_MARK.findall(unit)) == 1 and units_in(unit) == 0 and is_clause_of_words(unit)


def units_in(text: str) -> int:
    """Sentences and lines in a unit (``a. b.`` is two, so is ``x\\ny\\n``)."""
    return len(_UNIT_END.findall(_LIST_MARK.sub("", text)))  # "1." is no sentence


def looks_like_code(text: str) -> bool:
    """Most non-blank lines look like code or data (statements, blocks, keys, tags)."""
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines:
        return False
    code = sum(1 for line in lines if _CODE_LINE.search(line))
    return 2 * code >= len(lines)


def holds_fence_line(text: str) -> bool:
    """Whether a line of ``text`` opens or closes a fence (``LineKind.FENCE``)."""
    if "```" not in text and "~~~" not in text:
        return False  # (the cheap look first: most copies hold no fence mark at all)
    return any(classify_line(line.strip()) is LineKind.FENCE for line in text.split("\n"))


def numbered_item_body(text: str) -> str | None:
    """The text after a list number (``12. Banana``: ``Banana``), or None when the unit is not
    one numbered item."""
    match = _NUMBERED.match(text)
    return text[match.end() :] if match else None


def is_table_row(text: str) -> bool:
    """Every non-blank line of the unit is a markdown table row."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    return bool(lines) and all(line.startswith("|") and line.endswith("|") for line in lines)


def numbers_of(text: str) -> list[str]:
    return _NUMBER.findall(text)
