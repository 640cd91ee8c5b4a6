"""The periodic watermark holds back only what cycle or counter could still cut
(``detect/suffix_hold.py``), and a counter begins where its copies began changing few numbers."""

from __future__ import annotations

import random

import pytest
from tests.detect_helpers import stream

from looprescue.config import DetectorConfig
from looprescue.corpus import random_deltas
from looprescue.detect import Hit, StreamDetector, scan_text


def most_held(text: str, channel: str, seed: int = 0) -> tuple[int, int, Hit | None]:
    """(the most chars held back after any delta, the furthest released, the hit if any)."""
    detector = StreamDetector(DetectorConfig(), watch="both")
    pos = released = most = 0
    for delta in random_deltas(text, random.Random(seed)):
        pos += len(delta)
        hit = detector.feed(channel, delta)
        if hit is not None:
            return most, released, hit
        safe = detector.safe_offset(channel)
        released = max(released, safe)
        most = max(most, pos - safe)
    return most, released, detector.flush(channel)


def training_log(epochs: int) -> str:
    rng = random.Random(epochs)
    loss, lines = 2.2, []
    for epoch in range(1, epochs + 1):
        loss *= 0.93
        lines.append(
            f"Epoch {epoch}/{epochs} - {rng.randint(40, 44)}s - loss: {loss:.4f} - "
            f"val_loss: {loss * 1.1 + rng.random() / 40:.4f} - val_acc: {0.4 + epoch / 90:.4f}\n"
        )
    return "".join(lines)


def multiplication_table(rows: int) -> str:
    head = "| × | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 |\n|---|---|---|---|---|---|---|---|---|\n"
    body = "".join(
        f"| **{i}** | " + " | ".join(str(i * j) for j in range(1, 9)) + " |\n"
        for i in range(1, rows + 1)
    )
    return head + body


LONGEST_LINE = 90  # the widest line of the texts above


@pytest.mark.parametrize("channel", ["text", "reasoning"])
@pytest.mark.parametrize(
    "text",
    [
        "The run finished. The log:\n\n```\n" + training_log(30) + "```\n\nIt overfits.",
        "The run finished. The log:\n\n" + training_log(30) + "\nIt overfits after epoch 20.",
        "Here is the table:\n\n" + multiplication_table(12) + "\nRead the row, then the column.",
        "```csv\ndate,high,low\n"
        + "".join(
            f"2024-03-{d:02d},{10 + d * 7 % 9}.{d % 10},{d * 3 % 7}.{d % 9}\n" for d in range(1, 29)
        )
        + "```\nThe warmest day was the 8th.",
    ],
    ids=["fenced-log", "log", "table", "csv"],
)
def test_rows_that_change_many_numbers_are_let_go_as_they_are_written(text, channel):
    # every line folds to the same template: the whole run was held back until it ended
    most, _, hit = most_held(text, channel)
    assert hit is None
    assert most <= 2 * LONGEST_LINE


def test_a_line_said_again_in_a_fence_is_still_held_from_its_second_copy():
    stuck = "Epoch 31/30 - 42s - loss: 0.2011 - val_loss: 0.4133 - val_acc: 0.7000\n"
    text = "Log:\n\n```\n" + training_log(30) + stuck * 40
    _, released, hit = most_held(text, "text")
    assert hit is not None and hit.rule == "cycle"
    assert text[hit.loop_start : hit.prune_offset] == stuck  # one copy kept
    assert released <= hit.prune_offset + hit.lead_in


def test_an_item_whose_number_wanders_is_still_held_as_a_counter_may_cut_it():
    # one list item said under numbers that neither count nor stay: a counter loop, which
    # cuts after its first copy, so its copies are held back as they come
    numbers = random.Random(1).sample(range(10, 900), 60)
    text = "Some PEPs:\n\n" + "".join(
        f"- PEP {n}: The style guide for Python code, written in 2001.\n" for n in numbers
    )
    _, released, hit = most_held(text, "text")
    assert hit is not None and hit.rule == "counter"
    assert released <= hit.prune_offset + hit.lead_in


@pytest.mark.parametrize("channel", ["text", "reasoning"])
def test_a_counter_begins_where_its_rows_stopped_changing_many_numbers(channel):
    # a table that moved on row by row, then one row again under a row number that counts on
    table = multiplication_table(7)
    stuck = "".join(f"| **{i}** | 7 | 14 | 21 | 28 | 35 | 42 | 49 | 56 |\n" for i in range(8, 50))
    text = "Here is the table:\n\n" + table + stuck
    last_row = text.rindex("| **7** |", 0, len("Here is the table:\n\n" + table))
    for hit in (scan_text(text, channel=channel)[0], stream(text, channel)):
        assert hit is not None and hit.rule == "counter"
        # the healthy rows stay; the one of them that the stuck rows repeat is the kept copy
        assert hit.loop_start == last_row
        assert text[hit.prune_offset :].startswith("| **8** |")
    _, released, hit = most_held(text, channel)
    assert hit is not None and released <= hit.prune_offset + hit.lead_in
