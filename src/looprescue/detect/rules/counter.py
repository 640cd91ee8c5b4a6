"""Rule ``counter``: copies identical but for their numbers, in a shape nobody asks for.

What it catches: a periodic run of the folded text (every number folded to one char,
``buffer.py``) whose copies differ in their numbers, when the unit is

* ``block``: prose of several sentences or lines restated with a new number (``### Step 9``
  and its paragraph, then ``### Step 10`` and the same paragraph);
* ``table``: a markdown table row whose only change is its row number;
* ``renumbered``: a numbered list item whose content is gone (``12. Banana``, ``13. Banana``;
  ``12. 12. 1. 12``);
* ``item``: one line whose numbers do not count up, or a row of results whose result never
  changes (``7 x 12 = 12``);
* ``tiny``: a template with hardly any text (``t1t2t3``, at most ``TINY_TEMPLATE_LETTERS``
  letters): a chant of numbers.

Why that is a loop: the text stays while only a number moves on, so the model says nothing new.

Not a loop (its guards): a counter template is what a user gets who asks for 40 CSS classes, a
JSON array, log lines, numbered stubs or SQL seed rows. So code and data (``looks_like_code``,
anything inside a fence) never fire; a one-line item whose index counts up or down by one step
is an enumeration; a log of measurements, whose copies change many numbers, passes
(``counterMaxChangingNumbers``), and so does a log's line that reads one value again and again,
a number that rises and falls, a status line or two between some of the readings
(``a_reading``; a list item is no log line); an answer key
whose lines each open with a label counting up, however its answers repeat (``numbered_lines``);
and a block of values worked out anew in each copy, a times table (``worked_out``).
Only the request says where an asked list should stop: that is the ``overrun`` rule's. A counter
needs one copy more than a cycle of the same unit (a prose block or a list item whose words
stay: as many; an item whose sentence stays, at least ``SENTENCE_ITEM_WIDTH`` wide: as many as a
block), ``counterMinRepeats`` at least, filling ``counterMinChars`` (a CJK char counted as two).

Where it cuts: after one copy, as ``cycle`` does (``copies.natural_start``). The runs are found
and tracked by ``rules/periodic.py``, which hosts this rule and ``cycle``.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.copies import (
    NumbersByLine,
    UnitFacts,
    copies_needed,
    copy_spans,
    copy_texts,
    fills,
)
from looprescue.detect.shape import (
    NO_SPACES_SCRIPT,
    Content,
    is_table_row,
    letters_in,
    looks_like_code,
    numbered_item_body,
    numbers_of,
    text_width,
    units_in,
)
from looprescue.detect.text import LineKind, classify_line, counter_label

# A renumbered list item at least this wide (``shape.text_width``) is a sentence, not an answer
# word: copies of it are a block restated (``cycleBlockRepeats``).
SENTENCE_ITEM_WIDTH: Final = 40
_NUMBER_RUN: Final = re.compile(r"[0-9]+")
# Copies a one-line template is judged on when it may be a log's line: over this many, a number
# read off a log (a latency, a queue depth, a download's percent) rises twice and falls twice
# nearly whatever its values (a fair coin fails that once in 85 runs of 11 steps).
READING_COPIES: Final = 12
READING_TURNS: Final = 2
# A counter template with at most this many letters (a CJK char counted as two) is a chant of
# numbers, not an enumeration anyone asked for (``t1t2t3``, ``1stu2stu``; ``用户编号 7`` is
# words).
TINY_TEMPLATE_LETTERS: Final = 4


def _same_item_renumbered(unit: str) -> bool:
    """One numbered list item whose content is gone: no number but its list number (``12.
    Banana``), or nothing but numbers (``12. 12. 1. 12``)."""
    body = numbered_item_body(unit)
    if body is None or "\n" in body.strip():
        return False
    return not numbers_of(body) or letters_in(body) == 0


def content_gone(texts: list[str]) -> bool:
    """Renumbered items are degenerate when their text stays while the number moves on, or,
    for items of nothing but numbers, when some number stays (``12. 12. 1. 12``): ``12. 12``,
    all of whose numbers count, is a list of numbers someone asked for."""
    bodies = [numbered_item_body(t) or "" for t in texts]
    if len(bodies) < 3 or letters_in(bodies[-1]) or not numbers_of(bodies[-1]):
        return True
    rows = [numbers_of(b) for b in bodies]
    return any(len({row[k] for row in rows}) == 1 for k in range(min(map(len, rows))))


def counter_shape(unit: str, content: Content) -> str | None:
    """Which kind of counter template the unit is, when its repetition can be a loop:
    ``table`` (a row: a loop when only its row number changes), ``renumbered`` (a list
    item whose content is gone: only its number, or only numbers), ``tiny`` (hardly any
    text), ``block`` (several sentences or lines of prose), ``item`` (one line: a loop
    only when its numbers do not count up or down, else it is an enumeration). None: code, data,
    or what a user asks for. (Inside a fence a counter template is always code.)"""
    if is_table_row(unit):
        return "table" if content in (Content.WORDS, Content.NUMERIC) else None
    if _same_item_renumbered(unit):
        return "renumbered"
    if content is not Content.WORDS or looks_like_code(unit):
        return None
    block = units_in(unit) >= 2
    if letters_in(unit) + len(NO_SPACES_SCRIPT.findall(unit)) <= TINY_TEMPLATE_LETTERS:
        # a row of results (``7 x 12 = 12``) is judged like an item: by whether its result
        # changes, not by the many copies a chant of numbers needs
        return "item" if "=" in unit and not block else "tiny"
    return "block" if block else "item"


def counter_copies_needed(cfg: DetectorConfig, unit: str, shape: str) -> float:
    if shape == "tiny":
        return max(cfg.counterMinRepeats, cfg.cycleCharRepeats)
    words = shape == "renumbered" and letters_in(unit) > 0
    if words and text_width(unit) >= SENTENCE_ITEM_WIDTH:
        # a sentence that stays while its list number counts on is a block restated: a
        # list of answers repeats a short word ("Yes", "无"), not a sentence
        return max(cfg.counterMinRepeats, cfg.cycleMinRepeats, cfg.cycleBlockRepeats)
    if shape == "block" or words:
        # several lines of prose restated with only a number changed, or one list item
        # whose words stay while its list number counts on: a copy of the same words is as
        # plain a loop as a verbatim one, and as long a unit to wait for
        return max(cfg.counterMinRepeats, copies_needed(cfg, unit, Content.WORDS))
    return max(cfg.counterMinRepeats, copies_needed(cfg, unit, Content.WORDS) + 1)


def has_index(rows: list[list[int]]) -> bool:
    """Whether some number of the rows (the numbers of consecutive copies, oldest first) is an
    index: it counts up or down by one step (a countdown is as orderly as a count)."""
    for position in range(min(len(row) for row in rows)):
        steps = {later[position] - earlier[position] for earlier, later in pairwise(rows)}
        if len(steps) == 1 and steps.pop() != 0:
            return True
    return False


def not_an_enumeration(
    numbers: NumbersByLine, win: TextWindow, spans: list[tuple[int, int]]
) -> bool:
    """A one-line counter template is an enumeration (what was asked for) when an index
    counts up or down by one step (a countdown is as orderly as a count), unless it is a row
    of results whose result never changes (``7 x 12 = 12``). Judged on the last few copies
    (their raw spans, oldest first)."""
    if len(spans) < 3:
        return False  # too few copies to tell: an enumeration by default
    if "=" in win.slice(*spans[-1]):
        texts = [win.slice(*span) for span in spans]
        results = [numbers_of(t.rsplit("=", 1)[1]) for t in texts if "=" in t]
        if len(results) == len(texts) and results[0] and all(r == results[0] for r in results):
            return True
    return not has_index([numbers.values(win, span) for span in spans])


def counter_shape_ready(
    cfg: DetectorConfig,
    facts: UnitFacts,
    win: TextWindow,
    onset: int,
    end: int,
    raw_chars: int,
    copies: float,
    in_fence: bool,
) -> str | None:
    """The unit's counter shape when its copies are enough for one: ``counterMinRepeats``
    whatever its shape (never one in a fence), filling ``counterMinChars``, a CJK char counted
    as two."""
    if in_fence or copies < cfg.counterMinRepeats:
        return None
    if not fills(win, onset, end, raw_chars, cfg.counterMinChars):
        return None
    return facts.counter_shape


def a_reading(numbers: NumbersByLine, win: TextWindow, latest: int, unit: int, copies: int) -> bool:
    """Whether a template is a log's lines: whole lines, no list item among them (a status
    line may come between the readings: ``Retrying.``), with a number that rises and falls
    (``READING_TURNS`` times each at least over the last ``READING_COPIES`` copies, once each
    while there are fewer), or that stays as often and moves by steps of two sizes or more. A
    log reads a value again and again (``queue depth 3``, ``7``, ``2``; a draining queue:
    ``7``, ``7``, ``6``, ``5``, ``5``, ``2``); a loop's numbers stay, count, or drift on (``PEP
    40``, ``PEP 43``, ``PEP 44``), and a list of the same words under wandering numbers is a
    list, not a log."""
    spans = copy_spans(win, latest, unit, min(copies, READING_COPIES))
    # Fewer copies than that: a number that rose and fell once already may be a reading; the
    # run is judged again at the next checkpoint, with more copies.
    turns = READING_TURNS if len(spans) >= READING_COPIES else 1
    lines = win.slice(*spans[-1])
    if not lines.endswith("\n"):
        return False
    if any(classify_line(line.strip()) is LineKind.LIST_ITEM for line in lines.splitlines()):
        return False
    rows = [numbers.values(win, span) for span in spans]
    for position in range(min(len(row) for row in rows)):
        rises = falls = stays = 0
        sizes: set[int] = set()
        for older, newer in pairwise(rows):
            step = newer[position] - older[position]
            if step > 0:
                rises += 1
            elif step < 0:
                falls += 1
            else:
                stays += 1
            sizes.add(abs(step))
        if rises >= turns and falls >= turns:
            return True
        if stays >= turns and rises + falls >= turns and len(sizes) >= 3:
            # a value read again, then another by an uneven step (a queue draining: 7, 7, 6,
            # 5, 5, 2): a count moves by one step every copy
            return True
    return False


def numbered_lines(win: TextWindow, spans: list[tuple[int, int]]) -> bool:
    """Whether the copies of a block are lines each of which is an item of a list: lines that
    open with a label counting up by one (``Statement 33: true.``, ``Statement 34: false.``:
    an answer key whose answers happen to repeat a few times in a row), or one line said with
    a number that counts up or down by one step (a countdown whose run was found two lines a
    copy). A block restated carries one number a copy (``### Step 9`` and its paragraph)."""
    if not spans:
        return False
    # the copies are one stretch of text; a copy need not begin at a line's start, so the
    # stretch's first and last lines may be parts of lines
    lines = [ln for ln in win.slice(spans[0][0], spans[-1][1]).split("\n")[1:-1] if ln.strip()]
    if len(lines) < len(spans) + 1:
        return False
    labels: list[int] = []
    for line in lines:
        label = counter_label(line)
        if label is None:
            break
        labels.append(label)
    if len(labels) == len(lines) and all(
        later - earlier == 1 for earlier, later in pairwise(labels)
    ):
        return True
    if len({_NUMBER_RUN.sub("#", line) for line in lines}) != 1:
        return False
    return has_index([[int(n) for n in numbers_of(line)] for line in lines])


def changes_allowed(cfg: DetectorConfig, shape: str) -> int:
    """Numbers a counter's copies may change on a line against the copy before: a table row
    only its row number, a renumbered item any (its content is gone), else
    ``counterMaxChangingNumbers``."""
    if shape == "table":
        return 1
    if shape == "renumbered":
        return 1 << 30
    return cfg.counterMaxChangingNumbers


def is_counter_loop(
    cfg: DetectorConfig,
    shape: str,
    changes: int,
    numbers: NumbersByLine,
    win: TextWindow,
    spans: list[tuple[int, int]],
    latest: int,
    unit: int,
    copies: int,
) -> bool:
    """Whether ``copies`` of a counter shape whose numbers change (``changes`` at most on one
    line of consecutive copies) are a loop: few numbers change (any for a renumbered item),
    only the row number of a table row, an item that is no enumeration and no log's line, a
    renumbered item whose content is gone."""
    return (
        changes <= changes_allowed(cfg, shape)
        and (shape != "item" or not_an_enumeration(numbers, win, spans))
        and (shape not in ("item", "block") or not a_reading(numbers, win, latest, unit, copies))
        and (shape != "renumbered" or content_gone(copy_texts(win, latest, unit, 6)))
        and (shape != "block" or not numbered_lines(win, spans))
        and (shape != "block" or not worked_out(numbers, win, spans, changes_allowed(cfg, shape)))
    )


def worked_out(
    numbers: NumbersByLine, win: TextWindow, spans: list[tuple[int, int]], steps: int
) -> bool:
    """Whether a block's numbers are values worked out anew in each copy: from every copy to
    the next, the numbers that change move by more than ``steps`` different amounts (a times
    table: ``4 × 3 = 12`` to ``5 × 3 = 15``, ``4 × 7 = 28`` to ``5 × 7 = 35``). A block
    restated moves its counter by one step wherever it says it, and a reading or two besides;
    a table of values says something new on every line."""
    rows = [numbers.values(win, span) for span in spans]
    if len(rows) < 2:
        return False
    for older, newer in pairwise(rows):
        moved = {new - old for old, new in zip(older, newer, strict=False) if new != old}
        if len(moved) <= steps:
            return False
    return True
