"""Rule paragraph: a long prose paragraph re-emitted verbatim in visible text."""

from __future__ import annotations

from tests.detect_helpers import CODE_BLOCK, stream

from looprescue.detect import scan_text

SUMMARY_A = (
    "I have completed all the steps in the implementation plan. The export feature should now be "
    "functional. I've added the settings toggle, created the background worker with its "
    "notification, implemented the permission flow for storage access, added the upload call, "
    "and changed the overlay so that the link is copied to the clipboard when it is ready.\n"
)
SUMMARY_B = (
    "I have completed the implementation of the export feature as per the detailed plan. All "
    "steps have been addressed, from the settings toggle to the final clipboard step. The code "
    "has been changed to support this new way of sharing reports, so that the app remains usable "
    "for people whose devices restrict background services. I am now finished with the task.\n"
)


def test_second_copy_of_a_long_prose_paragraph_fires_before_a_third():
    text = SUMMARY_A + SUMMARY_B + SUMMARY_A + SUMMARY_B
    hit = stream(text, "text", sizes=(2, 6))
    assert hit is not None and hit.rule == "paragraph"
    second_a = len(SUMMARY_A) + len(SUMMARY_B)
    assert hit.prune_offset == second_a  # the first copy and what followed it are kept
    assert hit.fired_at < second_a + len(SUMMARY_A)  # caught inside the second copy


def test_paragraph_rule_only_applies_to_visible_text():
    # Reasoning quotes things it read (prompts, errors) verbatim; there it takes three copies.
    text = SUMMARY_A + SUMMARY_B + SUMMARY_A
    assert scan_text(text, "reasoning") == []
    assert scan_text(text, "text")[0].rule == "paragraph"


def test_short_lines_of_a_refrain_are_not_a_paragraph():
    chorus = (
        "And we sail on through the night\n"
        "With the harbour lights behind us\n"
        "And the morning far ahead\n"
        "Till the open sea has found us\n"
    )
    verses = [
        "The rope was cold in my hands that year\nThe deck was wet with rain\n"
        "My father stood beside the mast\nAnd never spoke my name\n",
        "We passed the reef at Coldwater Point\nWe passed the lighthouse too\n"
        "The keeper waved his lantern twice\nThe way he used to do\n",
        "Now I am old and the boat is sold\nBut some nights still I hear\n"
        "The water knocking on the hull\nAs if the sea were near\n",
    ]
    song = "".join(verse + "\n" + chorus + "\n" for verse in verses) + chorus
    assert scan_text(song, "text") == []


def test_quoting_the_same_code_twice_while_planning_an_edit():
    plan = (
        "The current loop is:\n" + CODE_BLOCK + "\nI need to change it so that closing happens in "
        "a finally block, because an exception in canonical() leaks the handle. So after the edit "
        "it reads the same except for the try/finally. Before that, let me re-read the original "
        "once more to be sure nothing else depends on the order:\n"
        + CODE_BLOCK
        + "\nRight, counts "
        "is only read after the loop. The edited version:\n    handle = open_log(path)\n    try:\n"
        + CODE_BLOCK.replace("    handle = open_log(path)\n", "")
        + "    finally:\n        handle.close()\n"
    )
    assert scan_text(plan, "reasoning") == []
    assert scan_text(plan, "text") == []


TRAVEL_DAY = (
    "Check out by 10:00 and send your large suitcases ahead with the hotel's luggage service, "
    "so that you travel light. Take the express train, reserve seats a day ahead, and buy a "
    "boxed lunch at the station before you board. On arrival, drop your bags at the hotel and "
    "keep the evening free: after a morning of packing and a long ride, a short walk and an "
    "early dinner near the hotel are enough for the day.\n\n"
)


def _day(n: int, what: str) -> str:
    return (
        f"**Day {n}: {what}**\n"
        f"Spend the morning at the old town's museum number {n}, then walk along the river to "
        f"the market for lunch, and visit garden {n} in the afternoon before the evening "
        f"walk through the lantern street, where the stalls open at dusk.\n\n"
    )


def test_a_paragraph_said_again_under_a_label_of_its_own_is_an_item():
    # a plan's travel day written out again under the day it falls on: the next item
    plan = (
        "Here is the itinerary.\n\n"
        + _day(1, "Arrival")
        + "**Day 2: Travel to Kyoto**\n"
        + TRAVEL_DAY
        + _day(3, "Kyoto")
        + "**Day 4: Travel to Tokyo**\n"
        + TRAVEL_DAY
        + _day(5, "Tokyo")
    )
    assert scan_text(plan, "text") == []
    # the same paragraph under the same label each time names no item
    again = "Here is the itinerary.\n\n" + "".join(
        "**Travel day**\n" + TRAVEL_DAY + _day(n, "Sights") for n in (1, 2)
    )
    hit = stream(again, "text", sizes=(3,))
    assert hit is not None and hit.rule == "paragraph"


def test_a_list_written_out_again_is_left_to_the_cycle_rules():
    week = (
        "- **Mon:** Rest day. No running at all. A twenty-minute walk and some gentle mobility "
        "work for hips, calves and ankles are fine.\n"
        "- **Tue:** Intervals. Fifteen minutes of warm-up, then four fast laps of the track "
        "with a slow jog between them, and a cool-down.\n"
        "- **Wed:** An easy run of half an hour at a pace you could hold a conversation at, on "
        "soft ground if you can find it.\n"
    )
    text = "### Week 1\n" + week + "\n### Week 2\n- **Mon:** Long run.\n\n### Week 3\n" + week
    assert scan_text(text, "text") == []
