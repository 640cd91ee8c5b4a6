"""Rule ``drift``: a block of paragraphs said again and again with a word or two changed.

What it catches. A model at some temperature that falls into a loop often does not repeat
itself char for char: each copy of its paragraph swaps a word (``slim design``, then
``lightweight design``, then ``modern design``), or a whole plan of three paragraphs is derived
again with ``maybe`` for ``possibly`` and ``还是`` for ``仍然``. No copy is the same text, so
the periodic rules see no period, and the paragraphs are too long to be phrases of a pool.

Why that is a loop. Every paragraph of the block says what the same paragraph of the copy
before it said: nothing new comes, the block only comes back.

What is not a loop. A paragraph is a prose line of at least ``MIN_TOKENS`` tokens (a word, a
number or a CJK char each), outside code fences, no table row, no code and no derivation (more
than one formula mark in ``NOTATION_PER`` tokens: a derivation restates its line with a term
changed; code it quotes in backticks, `` `<React.StrictMode>` ``, is not looked at), unless
it is ``PROSE_SENTENCES`` sentences or more (a problem worked through in sentences, restated
with a word swapped, is prose). A copy is a near-copy of the paragraph
``L`` paragraphs before it (the block's length, one to ``MAX_BLOCK``): at most
``max(2, tokens / 10)`` token edits apart, its sentences in their own order or sorted (a copy
that says two sentences the other way round says the same), or with one sentence more or less,
and with the same numbers (one may say a few of them once more or once less, but neither says a
number the other does not), since a paragraph that says other numbers says something new (a
case, a measurement, a count: ``counter``'s business). In a block of two paragraphs or more,
one paragraph in each copy may be a loose copy (``LOOSE_EDITS``, one edit in ``LOOSE_PER``
tokens): a re-derived conclusion whose connector says ``redo`` where it said ``re-check``. A
loose copy never opens a run, and blocks whose every paragraph changes that much are parallel
items, not copies, unless it brings no word the recent paragraphs did not say (at most
``NEW_WORDS``) and is ``STALE_TOKENS`` long: then it says them again in other words of its
own, and may open and carry any run (a shorter line with its values moved is a procedure's
next step: ``move disc 2 from A to C``, then ``disc 1 from B to C``); so may a paragraph
whose sentences are mostly (``RECOMBINED_SHARE``) ones they said word for word, mixed anew.
Copies that are all the same text are the periodic rules' (they cut them sooner); at least
one copy must differ, if only in a comma or a space. A refrain between
verses, or a paragraph restated once, makes no run of ``cycleMinRepeats`` copies of a block.
Short lines (a heading, a connector such as ``Hmm.``) between the paragraphs neither count nor
break the run, and a line's label (``Monday:``, ``3.``) is left out; but a paragraph under a
label line (``Dear Ann,``, ``佳美的正文：``) other than its counterpart's is another item of a
list, not a copy: three letters that differ only in the name they open with are three letters,
and so are three blurbs under their own headings (``### Forest Green``, ``**Slate Blue**``),
and the cases of a case split, each named on a short line of its own that opens with a label
(``Case 3: A knight, B knave.``, ``Friday: yesterday was Thursday.``), or, with no line over
it, in its line's own label (``1号是星期二：…``). A connector over a copy (``Let me
re-plan.``) and a list's item (``- **规律作息**：…``) name nothing.
A label that comes back over a later copy names no item (recaps taking turns: ``In short:``,
``Once again:``, ``In short:``): then none of the run's labels does. Paragraphs whose own labels
count on, one a paragraph (``Case 1:``, ``Case 2:``, ``3.``), are the cases of an enumeration
checked in the same words (a knight or a knave in each slot), which only the request bounds.

Where it cuts. After the first copy of the block (its last line, and the blank lines after it
when nothing else comes before the second copy): the first copy is kept, as a periodic loop
keeps one.

How it stays incremental. Lines are read once, at the checkpoint after they end; a paragraph is
compared with the last ``MAX_BLOCK`` paragraphs: by its length first (a near-copy's hardly
changes), then by its numbers, and only then are both read into tokens and held to their token
sets and a banded edit distance (up to the loose bound, computed once). Its sentences are split
only when a sentence more or less, or a new mix of recent sentences, is looked for; what a
paragraph is read into is kept with it, and at most ``MAX_BLOCK`` paragraphs are kept.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.nearcopy import edit_distance_up_to
from looprescue.detect.rule import CHECKPOINT, WATERMARK, LineRule
from looprescue.detect.segment import Segmenter
from looprescue.detect.shape import looks_like_code
from looprescue.detect.text import (
    LABEL_ENDS,
    TOKEN,
    excerpt,
    notation_marks,
    numbers_said,
    unquoted,
)

_FEEDS: Final = frozenset({CHECKPOINT, WATERMARK})

# A paragraph has at least this many tokens: a sentence or two. Shorter lines (headings, list
# labels, verse) repeat with small changes in healthy text.
MIN_TOKENS: Final = 16
# Blocks of up to this many paragraphs: a model re-deriving a plan of a dozen paragraphs.
MAX_BLOCK: Final = 12
# A near-copy is at most this many token edits apart, or one in EDITS_PER tokens when longer:
# a synonym swapped here and there, not a new topic.
MIN_EDITS: Final = 2
EDITS_PER: Final = 10
# In a block of two paragraphs or more, one paragraph in each copy of the block may be a loose
# copy: at most this many token edits apart, or one in LOOSE_PER tokens when longer (the
# connector line of a re-derived conclusion: "Hmm, let me re-check", "Wait, let me redo").
LOOSE_EDITS: Final = 4
LOOSE_PER: Final = 4
# A loose copy with at most this many words the recent paragraphs did not say may go on any run,
# and open one: it rephrases them with their own words. (None: an item that differs from the
# one before in a new name and a word or two is the next item of a list.)
NEW_WORDS: Final = 0
# A paragraph of fewer tokens is never such a copy: the steps of a procedure say the same few
# words with their values changed, and LOOSE_EDITS are a fifth of a line that short.
STALE_TOKENS: Final = 24
# A paragraph with this share of its tokens in sentences recent paragraphs said word for word,
# and no new words, says them again in another mix: a loose copy.
RECOMBINED_SHARE: Final = 0.75
# what a paragraph is of a recent one
_NONE: Final = 0
_NEAR: Final = 1
_LOOSE: Final = 2
_RENUMBERED: Final = 3  # a loose copy with one number changed: never stale (``_one_number_apart``)
# The fewest paragraphs of a block one of whose copies may change a number: a log's line or
# two say the same but for a reading, and a reasoning block said again whole is longer.
RENUMBERED_BLOCK: Final = 3
# While a line is written, this many chars of it that a recent paragraph begins with hold it
# back: it may be the next copy (a copy's change mostly comes later in it).
PREFIX_CHARS: Final = 48
# A paragraph has at most one formula mark (= + ^ < > | { } \\ and math signs) in this many
# tokens: more make it a derivation or code.
NOTATION_PER: Final = 6
# A line of this many sentences is prose, however many formula marks it holds.
PROSE_SENTENCES: Final = 3
# a sentence's end inside a line: a full stop before a space, or a full-width one
_SENTENCE_END: Final = re.compile(r"[.!?](?=\s)|[。！？]|[.!?]$")
_SENTENCE_SPLIT: Final = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
# How far back a line's beginning is looked for: a block of a dozen paragraphs.
LOOK_BACK: Final = 8000

# A line's label: a list mark or number, then up to three words and a colon.
_LABEL: Final = re.compile(
    r"^(?:[-*+•]\s+|[0-9]{1,4}[.)、]\s*)?(?:\*\*)?(?:[^\s:：*]{1,24}(?:\s[^\s:：*]{1,24}){0,2})?"
    r"(?:\*\*)?(?::(?=[\s*])|：)(?:\*\*)?\s*|^(?:[-*+•]\s+|[0-9]{1,4}[.)、]\s*)"
)
# A short line, no list item, that opens with a label of its own names what comes under it:
# ``Case 3: A knight, B knave.``, ``Friday: yesterday was Thursday.`` (a connector, ``Let me
# re-plan.``, names nothing; a list's item, ``- **规律作息**：…``, is one of its list).
_OPENS_LABEL: Final = re.compile(
    r"(?:\*\*)?[^\s:：*\-+•]{1,24}(?:\s[^\s:：*]{1,24}){0,2}(?:\*\*)?(?::(?=[\s*])|：)"
)
_CJK: Final = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
# The number of a line's label, when it has one: ``Case 3:``, ``3.``, ``**Step 3**:``.
_NUMBERED: Final = re.compile(
    r"(?:[-*+•]\s+)?(?:\*\*)?(?:[^\W\d_]{1,12}[ \t]*)?([0-9]{1,4})[ \t]*(?:\*\*)?[:.)、]"
)
# whether the line being written begins like a recent paragraph
_UNDECIDED: Final = 0
_LIKE: Final = 1
_UNLIKE: Final = 2


@dataclass(slots=True)
class _Paragraph:
    start: int  # where its line begins
    end: int  # where its line ends (after the line break)
    text: str  # the line, stripped, its label left out
    label: str  # the label line right before it, if any (``Dear Ann,``, ``Day 2:``)
    number: int  # the number of its own label (``Case 3:``, ``3.``), -1 when it has none
    # read when first compared (most paragraphs are like none of the recent ones by length)
    tokens: list[str] = field(default_factory=list)
    kinds: set[str] = field(default_factory=set)  # its tokens as a set, for a quick look
    numbers: list[str] = field(default_factory=list)
    counted: bool = False
    read: bool = False
    # its tokens with its sentences put in order (read when its tokens in their own order are
    # too far from another paragraph's)
    ordered: list[str] | None = None
    # its sentences' tokens, sorted (read when a copy may have one sentence more or less)
    split: list[list[str]] | None = None
    count: int = -1  # its sentences (-1: not counted yet)

    def read_numbers(self) -> None:
        """Its numbers alone: a cheaper look than its tokens, and most paragraphs of a
        similar length differ in them already."""
        if not self.counted:
            self.numbers = numbers_said(self.text)
            self.counted = True

    def read_tokens(self) -> None:
        if not self.read:
            self.tokens = TOKEN.findall(self.text)
            self.kinds = set(self.tokens)
            self.read = True

    @property
    def sentences(self) -> int:
        """How many sentences it has, as ``sentences_in_order`` splits it."""
        if self.count < 0:
            # (counted once: asked of every pair of paragraphs alike in length)
            self.count = len(_SENTENCE_SPLIT.findall(self.text)) + 1
        return self.count

    def sentence_tokens(self) -> list[list[str]]:
        """Its sentences' tokens, the sentences sorted."""
        if self.split is None:
            self.split = sorted(TOKEN.findall(s) for s in _SENTENCE_SPLIT.split(self.text))
        return self.split

    def sentences_in_order(self) -> list[str]:
        """Its tokens, sentence by sentence, the sentences sorted: two paragraphs that say
        the same sentences in another order read the same so."""
        if self.ordered is None:
            self.ordered = [token for sentence in self.sentence_tokens() for token in sentence]
        return self.ordered


class DriftRule(LineRule):
    def names(self) -> tuple[str, ...]:
        return ("drift",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        super().__init__()
        self._channel = channel
        self._copies: float = cfg.cycleMinRepeats
        self._recent: list[_Paragraph] = []  # the last MAX_BLOCK paragraphs, oldest first
        # per block length L: how many paragraphs in a row were near-copies of the one L back,
        # and whether any of them differed from it
        self._runs = [0] * (MAX_BLOCK + 1)
        self._running = False  # whether any run is under way
        self._drifted = [False] * (MAX_BLOCK + 1)
        # per block length: the run's count when a loose copy last came (one per block)
        self._loose = [0] * (MAX_BLOCK + 1)
        # per block length: whether the run's copies stand under new labels of their own (a
        # list of items), and whether a label came back among them (no item after all)
        self._items = [False] * (MAX_BLOCK + 1)
        self._relabelled = [False] * (MAX_BLOCK + 1)
        # per block length: where the run's first copy begins, and where it ends (the cut)
        self._first = [0] * (MAX_BLOCK + 1)
        self._kept_to = [0] * (MAX_BLOCK + 1)
        self._label = ""  # the label line since the last paragraph (``Dear Ann,``)
        self._text_end = 0  # where the latest line that is not blank ends
        self._returned = 0  # the watermark given last
        # the lines not read yet, by where they begin: whether they begin like a paragraph
        self._verdicts: dict[int, int] = {}
        self._passed = 0  # the unread lines before this are blank or like no paragraph

    def on_ended_line(
        self, line: str, start: int, end: int, cp: int, segmenter: Segmenter
    ) -> Hit | None:
        self._verdicts.pop(start, None)  # (read now: no longer held while it is written)
        stripped = line.strip()
        if not stripped:
            return None  # a blank line goes with whatever is around it
        previous_end, self._text_end = self._text_end, end
        if segmenter.code_or_table(stripped, start):
            self._reset()
            return None
        # a label that changes from line to line (``Monday:``, ``Day 2:``, ``3.``) makes a
        # list, not a copy: lines are compared without it
        few = stripped.isascii() and stripped.count(" ") < MIN_TOKENS - 1  # (most lines)
        body = stripped
        head = stripped[:80]
        if not few and (":" in head or "：" in head or not head[0].isalnum() or head[0].isdigit()):
            body = _LABEL.sub("", stripped, count=1)
        if few or (not stripped.isascii() and len(body) < MIN_TOKENS):
            # too few words or chars for a paragraph's tokens (most lines): a heading or a
            # label, neither a paragraph nor a break, but the label of the paragraph after it
            if stripped[-1] in LABEL_ENDS or _is_heading(stripped) or _OPENS_LABEL.match(stripped):
                self._label = stripped
            return None
        numbered = _NUMBERED.match(stripped) if len(body) < len(stripped) else None
        number = int(numbered.group(1)) if numbered is not None else -1
        label = self._label or stripped[: len(stripped) - len(body)].strip()
        paragraph = _Paragraph(start, end, body, label, number)
        self._label = ""
        recent = self._recent
        hit: Hit | None = None
        # which recent paragraphs this one is a copy of, the latest first (most are none)
        copies = [_copy_of(paragraph, o) for o in reversed(recent)]
        stale = False
        if not any(copies) and self._running:
            # (no copy of one paragraph: it may still say theirs again, sentence by sentence)
            copies = self._recombined(paragraph, copies)
        if any(copies):
            paragraph.read_tokens()
            if not _prose(body, len(paragraph.tokens)) and not self._said_as_is(body):
                self._reset()  # code or a derivation: lines a term apart are how they are
                return None  # written (one said word for word is no step of it)
            if _LOOSE in copies:
                stale = self._stale(paragraph)
        elif not self._running:
            recent.append(paragraph)  # (most paragraphs: no copy, and no run to end)
            if len(recent) > MAX_BLOCK:
                del recent[0]
            return None
        label = paragraph.label
        # a label not over any recent paragraph names a new item; one said again names none
        # (``In short:``, then ``Once again:``, then ``In short:`` over the same paragraph)
        new_label = bool(label) and all(p.label != label for p in recent)
        for lag in range(1, MAX_BLOCK + 1):
            if lag > len(recent):
                continue
            copy = copies[lag - 1]
            if (
                ((copy == _LOOSE and not stale) or copy == _RENUMBERED)
                and (self._runs[lag] == 0 or self._runs[lag] + 1 - self._loose[lag] < lag)
            ) or (copy == _RENUMBERED and lag < RENUMBERED_BLOCK):
                # a loose copy that brings new words (or a new number) goes on a run of a
                # block, one in each copy of the block at most: it neither opens a run nor
                # carries a block of one paragraph (a schedule's days, each with its own names
                # and places); one with a number changed goes only on a block of
                # RENUMBERED_BLOCK paragraphs or more (a log's line or two, a reading changed)
                copy = _NONE
            elif copy == _RENUMBERED:
                copy = _LOOSE
            if copy == _NONE:
                self._runs[lag] = 0
                continue
            other = recent[-lag]
            same = other.text == body  # (a comma or a space changed is a drifted copy)
            if self._runs[lag] == 0:
                # a second copy of the block begins: its first copy ends where this begins
                self._drifted[lag] = False
                self._loose[lag] = -MAX_BLOCK
                self._items[lag] = self._relabelled[lag] = False
                self._first[lag] = recent[-lag].start
                # (with the blank lines after it, when nothing else came between)
                kept = recent[-1].end
                self._kept_to[lag] = start if previous_end == kept else kept
            if number >= 0 and number - other.number == lag:
                # its label counts on from its counterpart's, one a paragraph (``Case 2:``
                # after ``Case 1:``): the next case of an enumeration, checked in the same
                # words, which only the request bounds
                self._items[lag] = True
            if label and other.label and other.label != label:
                # under a new label it is another item of a list (a letter to the next
                # person; a heading over the first copy alone labels no item), unless the
                # labels come back: then none of them names an item
                if new_label:
                    self._items[lag] = True
                else:
                    self._relabelled[lag] = True
            self._runs[lag] += 1
            if copy == _LOOSE:
                self._loose[lag] = self._runs[lag]
            self._running = True
            self._drifted[lag] = self._drifted[lag] or not same
            run = self._runs[lag]
            if (
                hit is None
                and self._drifted[lag]
                and run >= (self._copies - 1) * lag
                and self._judged(lag)
            ):
                cut = self._kept_to[lag]
                hit = Hit(
                    rule="drift",
                    channel=self._channel,
                    prune_offset=cut,
                    loop_start=self._first[lag],
                    fired_at=end,
                    repeats=1 + run / lag,
                    period=cut - self._first[lag],  # the block, as first said
                    evidence=excerpt(body[:PREFIX_CHARS]),
                    lead_in=max(0, self._returned - cut),
                )
        recent.append(paragraph)
        if len(recent) > MAX_BLOCK:
            del recent[0]
        return hit

    def _line_like(self, win: TextWindow, segmenter: Segmenter, line_start: int) -> bool:
        """Whether the line at ``line_start`` begins like a recent paragraph, or like a line
        not read yet (a paragraph it could copy may be one). Decided for good once it is like
        none, or once ``PREFIX_CHARS`` of it are like one."""
        verdict = self._verdicts.get(line_start, _UNDECIDED)
        if verdict != _UNDECIDED:
            return verdict == _LIKE
        raw, rel = win.raw, line_start - win.base
        line, ended = raw[rel : rel + 4 * PREFIX_CHARS], False
        if "\n" in line:
            line, ended = line.split("\n", 1)[0], True
        so_far = line.lstrip()[:PREFIX_CHARS]
        if not so_far:
            return not ended  # nothing but indentation yet
        if (
            segmenter.fence_open_since(line_start)
            or (ended and len(TOKEN.findall(line)) < MIN_TOKENS)
            or (
                len(so_far) == PREFIX_CHARS  # (a few chars of a line tell nothing of it)
                and not _prose(so_far, len(TOKEN.findall(so_far)))
            )
        ):
            self._verdicts[line_start] = _UNLIKE  # code, or too short to be a paragraph
            return False
        # (an earlier line that begins so: the block's paragraphs start at a line's start)
        indent = line[: len(line) - len(line.lstrip())]
        found = raw.rfind("\n" + indent + so_far, max(0, rel - LOOK_BACK), rel)
        # it must begin like one of the paragraphs a run compares with, or like a line not
        # read yet (the latest such line only: the hold is a guess, never a cut)
        earlier = win.base + found + 1
        if found < 0 or (earlier < self._read and all(p.start != earlier for p in self._recent)):
            self._verdicts[line_start] = _UNLIKE
            return False
        if len(so_far) == PREFIX_CHARS:
            self._verdicts[line_start] = _LIKE
        return True

    def _said_as_is(self, text: str) -> bool:
        """Whether a recent paragraph said ``text`` word for word."""
        return any(other.text == text for other in self._recent)

    def _stale(self, paragraph: _Paragraph) -> bool:
        """Whether a paragraph says nothing in words the recent paragraphs have not said: at
        most ``NEW_WORDS`` of its tokens are new to them. A loose copy so is the same thing
        said again in other order and with other words from the same handful (a model that
        re-derives its count with ``comes from`` for ``is produced by``). A paragraph of
        fewer than ``STALE_TOKENS`` is no such copy: a step of a procedure says its few words
        again, four edits apart (``move disc 2 from A to C``, then ``disc 1 from B to C``)."""
        if len(paragraph.tokens) < STALE_TOKENS:
            return False
        said: set[str] = set()
        for other in self._recent:
            other.read_tokens()
            said |= other.kinds
        return len(paragraph.kinds - said) <= NEW_WORDS

    def _recombined(self, paragraph: _Paragraph, copies: list[int]) -> list[int]:
        """``copies`` with a loose copy of each recent paragraph of its size and numbers that
        ``paragraph`` says again sentence by sentence: most of its tokens
        (``RECOMBINED_SHARE``) are in sentences the recent paragraphs said word for word, and
        it brings no new words (``_stale``). A model that re-derives a count takes each
        sentence from one of the ways it said it before (``comes from``, ``arises from``),
        so no two copies are alike, yet nothing is new."""
        # the recent paragraphs of its size (in chars first, the cheap look) and numbers
        paragraph.read_numbers()
        chars = len(paragraph.text)
        alike = []
        for i, other in enumerate(reversed(self._recent)):
            if abs(len(other.text) - chars) * 10 <= 3 * chars:
                other.read_numbers()
                if _same_numbers(paragraph.numbers, other.numbers):
                    alike.append(i)
        if not alike:
            return copies  # (most paragraphs)
        paragraph.read_tokens()
        size = len(paragraph.tokens)
        if size < MIN_TOKENS or not self._stale(paragraph):
            return copies
        said = {tuple(s) for other in self._recent for s in other.sentence_tokens()}
        repeated = sum(len(s) for s in paragraph.sentence_tokens() if tuple(s) in said)
        if repeated < RECOMBINED_SHARE * size:
            return copies
        out = list(copies)
        for i in alike:
            out[i] = _LOOSE
        return out

    def _judged(self, lag: int) -> bool:
        """Whether the run of copies at ``lag`` may be a loop: no list of labelled items."""
        return self._relabelled[lag] or not self._items[lag]

    def _reset(self) -> None:
        """Code, a table or a fence between paragraphs: the runs of copies are over."""
        if self._running:
            self._runs = [0] * (MAX_BLOCK + 1)
            self._running = False

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """Earliest offset a future hit could prune: after the first copy of a block whose
        near-copies go on, and the line being written while it begins like a recent
        paragraph (it may be the next copy)."""
        held = win.end
        if self._running:
            for lag in range(1, MAX_BLOCK + 1):
                if self._runs[lag] and self._kept_to[lag] < held and self._judged(lag):
                    held = self._kept_to[lag]
        # The lines not read yet (a line is read at the checkpoint after it ends): the first
        # that begins like a recent paragraph may be its next copy. An ended line found blank
        # or like none stays so: the next call begins after it (this runs after every delta).
        raw, base = win.raw, win.base
        at, stop = max(self._read, self._passed) - base, min(held - base, len(raw))
        while at < stop:
            verdict = self._verdicts.get(base + at, _UNDECIDED)
            if verdict == _LIKE:
                held = base + at
                break
            brk = raw.find("\n", at)
            if verdict == _UNDECIDED:
                blank = not raw[at : (brk if brk >= 0 else len(raw))].strip()
                if (brk < 0 or not blank) and self._line_like(win, segmenter, base + at):
                    held = base + at
                    break
            if brk < 0:
                break
            at = brk + 1
            self._passed = base + at
        # What went out stays out: a copy whose change came early in it was let go as it was
        # written, and a hit counts it as the lead-in it is.
        held = max(held, self._returned)
        self._returned = held
        return held


def _is_heading(line: str) -> bool:
    """Whether a short line is a heading: markdown's (``### Forest Green``) or a bold line
    (``**Slate Blue**``). It names the paragraph under it, as ``Dear Ann,`` does."""
    return line.startswith("#") or (len(line) > 4 and line.startswith("**") and line.endswith("**"))


def _prose(line: str, tokens: int) -> bool:
    """Whether a line reads as prose: not code (a Chinese paragraph with a formula in it,
    ``x=0.999…``, is prose), and no more than one formula mark in ``NOTATION_PER`` tokens
    (a derivation restates its line with one term changed), unless it says what it says in
    ``PROSE_SENTENCES`` sentences or more: a derivation's line is one statement, and a
    paragraph that works a problem through in sentences is prose however many formulas it
    holds (``v² = u² + 2as``, restated with a word swapped). Code it quotes in backticks is
    left out of both looks: it is named, not written."""
    line = unquoted(line)
    if looks_like_code(line) and 4 * len(_CJK.findall(line)) < len(line):
        return False
    return (
        NOTATION_PER * notation_marks(line) <= tokens
        or len(_SENTENCE_END.findall(line)) >= PROSE_SENTENCES
    )


def _copy_of(a: _Paragraph, b: _Paragraph) -> int:
    """What paragraph ``a`` is of ``b``: a copy (``_NEAR``: the same text, or a near-copy with
    the same numbers, its sentences in the same order or not), a loose copy (``_LOOSE``: the
    same, a few more edits apart), or none. One with other numbers says something new (a
    case, a measurement, a count); a copy that swaps two sentences says the same."""
    if a.text == b.text:
        return _NEAR
    # a near-copy swaps a word or two: its length hardly changes (looked at before its tokens)
    # (a copy with a sentence more or less is looked for below, within this bound)
    if abs(len(a.text) - len(b.text)) > len(a.text) // 5 + 8:
        return _NONE
    a.read_numbers()
    b.read_numbers()
    if a.numbers != b.numbers and not _same_numbers(a.numbers, b.numbers):
        if _one_sentence_apart(a, b):
            return _NEAR
        return _RENUMBERED if _one_number_apart(a, b) else _NONE
    a.read_tokens()
    b.read_tokens()
    longer = max(len(a.tokens), len(b.tokens))
    loose = max(LOOSE_EDITS, longer // LOOSE_PER)
    # (each edit changes at most one distinct token on either side, in any order)
    if (
        len(a.tokens) < MIN_TOKENS
        or abs(len(a.tokens) - len(b.tokens)) > loose
        or len(a.kinds ^ b.kinds) > 2 * loose
    ):
        return _NONE
    near = max(MIN_EDITS, longer // EDITS_PER)
    edits = edit_distance_up_to(a.tokens, b.tokens, loose)
    if edits > near and (a.sentences > 1 or b.sentences > 1):
        # (the same sentences in another order: compared sorted)
        edits = min(
            edits, edit_distance_up_to(a.sentences_in_order(), b.sentences_in_order(), loose)
        )
    if edits <= near or _one_sentence_apart(a, b):
        return _NEAR
    return _LOOSE if edits <= loose else _NONE


def _same_numbers(a: list[str], b: list[str]) -> bool:
    """Whether two paragraphs say the same numbers: one says all the other's, a few of them
    once more or once less (``so 1 outcome``, then ``a single outcome``; ``35只全部是鸡``,
    then ``全是鸡``). Numbers each says that the other does not are something new (another
    case, another reading), and so is a number said many times more (``Section 2`` all
    through a paragraph that said ``Section 1``)."""
    mine, theirs = set(a), set(b)
    if not (mine <= theirs or theirs <= mine):
        return False
    apart = Counter(a)
    apart.subtract(b)
    return sum(abs(n) for n in apart.values()) <= max(MIN_EDITS, max(len(a), len(b)) // EDITS_PER)


def _one_number_apart(a: _Paragraph, b: _Paragraph) -> bool:
    """Whether two paragraphs of ``STALE_TOKENS`` or more say the same words, one number
    changed (``initialDelaySeconds`` raised to 60, then to 45). Such a copy is loose: a
    block said again with one such change is a loop, but the one paragraph alone may be the
    next case of a list (a loose copy neither opens a run nor carries a block of one)."""
    if len(a.numbers) != len(b.numbers):
        return False
    if sum(x != y for x, y in zip(a.numbers, b.numbers, strict=True)) != 1:
        return False
    a.read_tokens()
    b.read_tokens()
    if len(a.tokens) != len(b.tokens) or len(a.tokens) < STALE_TOKENS:
        return False
    return sum(x != y for x, y in zip(a.tokens, b.tokens, strict=True)) == 1


def _one_sentence_apart(a: _Paragraph, b: _Paragraph) -> bool:
    """Whether one paragraph says what the other does with one sentence more: the same
    sentences in any order, a few token edits apart (``EDITS_PER``), and the same numbers,
    once that sentence is left out (a re-derivation that drops its closing remark). A copy
    that says another sentence instead of one says something new."""
    more, fewer = (a, b) if len(a.text) > len(b.text) else (b, a)
    more.read_numbers()
    fewer.read_numbers()
    # (the cheap looks first: most paragraphs of a length say other numbers)
    if not set(fewer.numbers) <= set(more.numbers) or len(more.text) > 2 * len(fewer.text) + 8:
        return False
    if more.sentences != fewer.sentences + 1 or fewer.sentences < 2:
        return False
    more.read_tokens()
    fewer.read_tokens()
    size = len(fewer.tokens)
    bound = max(MIN_EDITS, size // EDITS_PER)
    # (every word of the shorter one is in the longer one, but for a few edits)
    if size < MIN_TOKENS or len(fewer.kinds - more.kinds) > bound:
        return False
    flat = fewer.sentences_in_order()
    numbers = {t for t in flat if "0" <= t[0] <= "9"}
    sentences = more.sentence_tokens()
    total = len(more.tokens)
    for left_out in range(len(sentences)):
        if abs(total - len(sentences[left_out]) - size) > bound:
            continue  # (leaving this one out leaves too many or too few tokens)
        rest = [t for i, s in enumerate(sentences) if i != left_out for t in s]
        if {t for t in rest if "0" <= t[0] <= "9"} == numbers and (
            edit_distance_up_to(rest, flat, bound) <= bound
        ):
            return True
    return False
