"""The language of notes, markers and corrections, judged by the scripts a text is written in.

looprescue writes its own words in Chinese or in English. Chinese is right only for Chinese
text: Japanese also writes with Han ideographs, so a rule that counts ideographs alone answers
Chinese for a Japanese conversation. Hiragana give Japanese away, and Hangul gives Korean away;
both get English, the language every such reader is likelier to read than Chinese.

The proxy (a request's human messages) and ``clean`` (the text a cut keeps) both ask here, so
they never disagree about a text.
"""

from __future__ import annotations

import re
from typing import Literal

Lang = Literal["zh", "en"]

# The judgement reads a bounded sample, so its cost never grows with the text.
SAMPLE_CHARS = 4096

_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]")
_HIRAGANA = re.compile("[\u3040-\u309f]")
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
# A unit of text: one ideograph, kana or Hangul syllable, or a run of other letters (a word).
# An ideograph carries about as much as a word, so counting letters would let the code and file
# names a Chinese prompt quotes outvote it.
_UNIT = re.compile(
    "[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ebef]"
    r"|[^\W\d_]+"
)

# Han ideographs must make up this share of the units: a Chinese prompt that quotes English
# code or file names is still Chinese, an English one that quotes a Chinese name is not.
HAN_SHARE = 1 / 3
# Japanese writes its particles and endings in hiragana, about one for every one or two
# ideographs even in dense official prose; Chinese writes none. One per twenty ideographs is far
# from both. Katakana are not counted: Chinese text quotes a katakana loanword now and then.
HIRAGANA_PER_HAN = 0.05


def text_language(text: str) -> Lang:
    """``zh`` when the start of ``text`` is Chinese, else ``en``."""
    sample = text[:SAMPLE_CHARS]
    units = len(_UNIT.findall(sample))
    if not units:
        return "en"
    han = len(_HAN.findall(sample))
    if han < units * HAN_SHARE:
        return "en"
    if len(_HIRAGANA.findall(sample)) >= han * HIRAGANA_PER_HAN:
        return "en"  # Japanese
    if len(_HANGUL.findall(sample)) >= han:
        return "en"  # Korean, which may still write some words in Hanja
    return "zh"
