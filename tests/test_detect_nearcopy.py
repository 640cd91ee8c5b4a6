"""A periodic loop's onset moves back over the near-copies that led into it, and only over them.

Texts are written for these tests, in the shapes a 135M model produced (corpus/smollm2.jsonl):
a sentence with a clause appended before the exact run, list lines with one word changed, a line
holding the loop's sentence several times. Also the ordinal fold (``21st`` / ``22nd`` / ``24th``
read alike) that lets a chain of ordinals be one period.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.detect_helpers import stream

from looprescue.config import DetectorConfig
from looprescue.detect import StreamDetector, scan_text
from looprescue.detect.buffer import TextWindow, fold

STORY = "Once there was a cat that liked to explore the big old house on the hill.\n\n"
VARIANT = "It walked into the next room, and then into the next room. "
EXACT = "It walked into the next room. "


def _only_hit(text: str, channel: str = "text"):
    hits = scan_text(text, channel)
    assert len(hits) == 1, hits
    return hits[0]


def test_a_sentence_with_a_clause_appended_is_part_of_the_loop():
    lead = VARIANT + EXACT + VARIANT + EXACT * 2 + VARIANT
    text = STORY + lead + EXACT * 40
    hit = _only_hit(text)
    # the exact run starts after the last variant; the loop starts at the first one
    assert hit.rule == "cycle"
    assert hit.loop_start == hit.prune_offset == len(STORY)
    assert hit.lead_in == len(lead) + len(EXACT)  # the first exact copy was kept before
    # the same text without its lead-in keeps one copy, as a cycle does
    plain = _only_hit(STORY + EXACT * 40)
    assert plain.prune_offset == len(STORY) + len(EXACT) and plain.lead_in == 0


def test_list_lines_a_word_apart_lead_into_the_loop_and_a_plain_list_before_them_stays():
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    plan = "".join(f"- {d}: {w}\n" for d, w in zip(days, ["Run", "Swim", "Rest"], strict=False))
    drift = "".join(f"- {d}: Breakfast (LUNCH)\n" for d in days[3:])
    loop = "".join(f"- {d}: Lunch (LUNCH)\n" for d in days) * 6
    head = "Here is your plan:\n\n"
    hit = _only_hit(head + plan + drift + loop)
    assert hit.prune_offset == len(head + plan), hit  # the drift is cut, the real plan kept


def test_code_lines_one_identifier_apart_are_not_near_copies():
    head = "Includes:\n#include <llvm/MC/MCAsmInfo.h>\n#include <llvm/MC/MCInst.h>\n"
    pair = "#include <llvm/Support/TargetSelect.h>\n#include <llvm/Support/TargetRegistry.h>\n"
    hit = _only_hit(head + pair * 40)
    assert hit.prune_offset == len(head) + len(pair) and hit.lead_in == 0


def test_inside_a_fence_only_exact_copies_lead_in():
    lines = ["    total += 1\n", "    count -= 1\n", "    total += 2\n"]
    near = "    grand += 2\n"  # one identifier from "total += 2"
    text = "```python\ndef f():\n" + near + lines[2] + lines[0] + "".join(lines) * 30
    hit = _only_hit(text)
    start = text.index(lines[2])
    assert start <= hit.loop_start, hit  # the near line stays
    assert hit.loop_start < text.index("".join(lines))  # the reshuffled exact copies do not


def test_a_line_holding_the_loops_sentence_several_times_leads_in_after_its_own_opening():
    sentence = "递归函数是一种简单的递归函数，它可以返回一个函数，用于返回一个函数。"
    opening = "递归是一种方法，用于将一个问题分成更小的问题。"
    text = opening + sentence * 3 + "\n\n" + sentence * 2 + "\n\n" + (sentence + "\n\n") * 20
    hit = _only_hit(text)
    assert hit.loop_start == len(opening), hit  # the opening sentence is no copy
    # only exact copies came before the run: the first one is kept, as a cycle keeps it
    assert hit.prune_offset == len(opening) + len(sentence)


def test_a_prose_paragraph_ending_like_the_loop_begins_is_kept():
    intro = "The cache keeps the last results so a repeated query is answered at once.\n\n"
    text = intro + ("The cache is warm now. Next I check the limits.\n") * 20
    hit = _only_hit(text)
    assert hit.loop_start == len(intro) and hit.lead_in == 0


def test_a_stream_releases_near_copies_and_counts_them_but_the_rule_cut_holds():
    text = STORY + VARIANT + EXACT + VARIANT + EXACT * 40
    hit = stream(text, "text", sizes=(4, 7))
    assert hit is not None and hit.prune_offset == len(STORY)
    assert hit.prune_offset + hit.lead_in == len(STORY + VARIANT + EXACT + VARIANT + EXACT)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(1, 9), min_size=1, max_size=12))
def test_the_lead_in_is_the_same_in_any_chunking(cuts):
    text = STORY + VARIANT + EXACT + VARIANT + EXACT * 2 + VARIANT + EXACT * 40
    assert stream(text, "text", sizes=cuts) == scan_text(text, "text")[0]
    restated = "".join(TOPICS) + TOPICS[1] + TOPICS[0].replace("keep", "store") + RUN_ON * 30
    assert stream(restated, "text", sizes=cuts) == scan_text(restated, "text")[0]


# -- ordinals ---------------------------------------------------------------------------------


def _ordinal(n: int) -> str:
    if 10 <= n % 100 <= 13:
        return f"{n}th"
    return f"{n}" + {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


CLAUSE = "用于表示一个系统，"


def test_a_clause_the_model_kept_coming_back_to_before_a_run_on_loop_is_part_of_it():
    # the clause four times in a sentence, the sentence again with a change, then the clause on
    # and on in one sentence that never ends: no segment of the loop to compare with, but its
    # unit's copies make up most of what came before it (with stutters judged as other short
    # units: at the default cycleClauseRepeats, the first sentence is cut already, see
    # tests/rules/test_stutter.py)
    lead = "在这个表格中，我们可以使用一个表格，"
    text = (
        lead
        + CLAUSE * 4
        + "。\n\n这个表格可以用来表示一个系统，"
        + CLAUSE * 3
        + "。\n\n这个表格可以用来"
    ) + CLAUSE * 60
    hits = scan_text(text, "text", DetectorConfig(cycleClauseRepeats=10))
    assert len(hits) == 1
    hit = hits[0]
    assert hit.rule == "cycle"
    assert hit.loop_start == hit.prune_offset == len(lead)
    assert hit.lead_in > 0  # a stream may have shown those copies: counted as leaked


def test_one_char_run_on_loop_takes_only_its_back_to_back_copies():
    # the 1s of 112 are no copies of the loop that follows it
    text = "例如：用数字112表示" + "1" * 200
    hit = _only_hit(text)
    assert hit.prune_offset == len("例如：用数字112表示")


def test_a_run_on_loop_after_unrelated_text_keeps_its_first_copy():
    lead = "这个表格可以用来说明每一列的含义，下面是具体内容："
    hit = _only_hit(lead + CLAUSE * 60)
    assert hit.loop_start == len(lead) and hit.prune_offset == len(lead) + len(CLAUSE)


def test_ordinal_suffixes_fold_alike():
    assert fold("the 21st, 22nd, 23rd and 24th day") == "the 0th, 0th, 0th and 0th day"
    assert fold("5 st 12 nd") == "0 st 0 nd"  # only letters right after the number


def test_a_chain_of_ordinals_that_does_not_count_is_a_loop():
    numbers = [17, 22, 21, 23, 18, 24, 25, 31, 29, 32, 33, 41, 34, 52, 61, 42, 43] * 3
    text = "The 30th log line is " + "".join(f"from the {_ordinal(n)} day " for n in numbers)
    hit = _only_hit(text)
    assert hit.rule == "counter"


def test_ordinals_that_count_up_are_an_enumeration():
    text = "Steps: " + "".join(f"the {_ordinal(n)} step, " for n in range(1, 60)) + "done."
    assert scan_text(text, "text") == []


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet="0123456789snrtdhx .\n好", max_size=80),
    cuts=st.lists(st.integers(1, 6), max_size=20),
)
def test_the_window_folds_like_fold_in_any_chunking(text, cuts):
    window = TextWindow(keep=10_000)
    pos = 0
    for size in [*cuts, len(text)]:
        piece = text[pos : pos + size]
        pos += len(piece)
        window.pending.append(piece)
        window.end += len(piece)
        window.sync()
    assert window.folded == fold(text)
    # offsets map across: only numbers change the number of chars, suffixes fold letter for letter
    for offset in range(len(text) + 1):
        assert window.folded_of(offset) == len(fold(text[:offset]))


def test_a_run_of_another_short_unit_that_a_run_on_loop_took_over_from_is_part_of_it():
    # SmolLM2 through the proxy: a phrase nine times (one copy short of a cycle of its own),
    # then one mark on and on. One degeneration: the phrase's first copy is kept, no more.
    lead, phrase = "光合作用是一种", "编程语言的"
    text = lead + phrase * 9 + "；" * 100
    hit = _only_hit(text)
    assert (hit.rule, hit.loop_start, hit.prune_offset) == ("cycle", len(lead), len(lead + phrase))
    # the watermark held the phrase's copies while they recurred: none of them was let out
    detector, released = StreamDetector(), 0
    for pos in range(0, len(text), 3):
        if detector.feed("text", text[pos : pos + 3]) is not None:
            break
        released = max(released, detector.safe_offset("text"))
    assert released <= hit.prune_offset


def test_only_a_run_of_words_with_three_copies_right_before_the_loop_is_taken():
    for before in (
        "光合作用是一种编程语言的编程语言的",
        "光合作用是一种——————————",
        "编程语言的" * 4 + "，然后",
    ):
        hit = _only_hit(before + "；" * 100)
        assert hit.loop_start == len(before), before


def test_a_run_cut_short_by_the_loop_is_taken_from_where_it_began():
    # the ninth copy lost its last char to the loop: the run still starts at the first copy
    lead, phrase = "光合作用是一种", "编程语言的"
    hit = _only_hit(lead + phrase * 8 + phrase[:-1] + "；" * 100)
    assert (hit.loop_start, hit.prune_offset) == (len(lead), len(lead + phrase))


# -- restated segments ------------------------------------------------------------------------

TOPICS = [
    "Coinbase is an online platform where people buy, sell and keep digital currencies such as "
    "bitcoin.\n\n",
    "Spam is unsolicited mail sent in bulk, most often to sell something or to cheat the people "
    "who read it.\n\n",
    "A ledger is a record of every payment, kept in the order the payments were made by "
    "everyone.\n\n",
]
RUN_ON = "用户可以通过它们的文本说明"


def test_paragraphs_restated_out_of_order_before_a_run_on_loop_are_part_of_it():
    # a first pass over three topics, then the model re-emits them (one with a word changed)
    # and gets stuck on one clause: the re-emissions are the loop's lead-in, the first pass
    # is the answer
    first_pass = "Three terms:\n\n" + "".join(TOPICS)
    restated = TOPICS[1] + TOPICS[0].replace("keep", "store") + TOPICS[2]
    hit = _only_hit(first_pass + restated + RUN_ON * 30)
    assert hit.loop_start == hit.prune_offset == len(first_pass), hit
    assert hit.lead_in > len(restated)  # a stream may have shown them: counted as leaked


def test_the_walk_over_restated_segments_stops_at_one_said_for_the_first_time():
    first_pass = "".join(TOPICS[:2])
    new = "Mining is how new blocks are added, by solving a puzzle that takes a lot of work.\n\n"
    text = first_pass + new + TOPICS[0] + RUN_ON * 30
    hit = _only_hit(text)
    assert hit.prune_offset == len(first_pass + new), hit  # the new paragraph stays


def test_a_heading_said_again_goes_with_the_restated_text_but_does_not_lead_in_alone():
    first_pass = "**Coinbase**\n\n" + TOPICS[0] + TOPICS[1]
    # the heading said again right before the loop: passed over, the loop keeps its first copy
    heading = "**Coinbase**\n\n"
    hit = _only_hit(first_pass + heading + RUN_ON * 30)
    assert hit.prune_offset == len(first_pass + heading) + len(RUN_ON), hit  # as without it
    # the heading between two restated paragraphs is walked over with them
    restated = TOPICS[1] + heading + TOPICS[0]
    hit = _only_hit(first_pass + restated + RUN_ON * 30)
    assert hit.prune_offset == len(first_pass), hit


def test_list_lines_restating_earlier_lines_with_a_new_number_lead_into_the_loop():
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    plan = "".join(f"- {d}: Day {n} (LUNCH)\n" for n, d in enumerate(days[:4], 1))
    again = "".join(f"- {d}: Day {n} (LUNCH)\n" for n, d in enumerate(days[:4], 8))
    loop = "".join(f"- {d}: Lunch (LUNCH)\n" for d in days) * 6
    head = "Here is your plan:\n\n"
    hit = _only_hit(head + plan + again + loop)
    assert hit.prune_offset == len(head + plan), hit  # 'Day 8'.. restate 'Day 1'..


def test_restated_code_lines_do_not_lead_in():
    code = "    value = compute(item)\n    results.append(value)\n"
    other = "    print(results)\n    print('the results are done')\n"
    text = "```python\nfor item in items:\n" + code + other + code + other * 40
    hit = _only_hit(text)
    assert hit.loop_start >= text.index(other, text.index(other) + 1) - len(code), hit


def test_counted_lines_restated_lead_into_a_cycle_but_lines_of_new_numbers_do_not():
    # "- Saturday: Day 8 (LUNCH)" restates "- Saturday: Day 5 (LUNCH)" with one number moved
    # on: a counted line the model drifts through on its way into the loop. A line whose
    # measurements all moved on says something new, and the walk stops before it.
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    head = "Here is your plan:\n\n"
    counted = "".join(f"- {d}: Day {n} (LUNCH)\n" for n, d in enumerate(days, 1))
    loop = "".join(f"- {d}: Lunch (LUNCH)\n" for d in days) * 6
    again = "".join(f"- {d}: Day {n} (LUNCH)\n" for n, d in enumerate(days, 8))
    hit = _only_hit(head + counted + again + loop)
    assert hit.prune_offset == len(head + counted), hit  # the counted lines said again lead in
    readings = "".join(
        f"- {d}: {20 + n} C, {60 - n}% humidity, {1000 + 3 * n} hPa\n"
        for n, d in enumerate(days * 2)
    )
    hit = _only_hit(head + readings + loop)
    assert hit.prune_offset == len(head + readings) + len(loop) // 6, hit  # the readings stay
