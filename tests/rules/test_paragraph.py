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
