"""Rule rows: a table that keeps drawing its rows from a handful, and real tables left alone."""

from __future__ import annotations

import random

from tests.detect_helpers import stream

from looprescue.detect import scan_text


def test_a_table_that_keeps_drawing_rows_from_a_handful():
    rng = random.Random(4)
    rows = ["| Monday | Monday | Monday |", "| Saturday | Saturday | Monday |", "| Sunday | Rest |"]
    head = "| Day | Week | Weekend |\n|---|---|---|\n| Tuesday | Wednesday | Friday |\n"
    body = "".join(rng.choice(rows) + "\n" for _ in range(60))
    hit = stream("Here is a table:\n\n" + head + body, "text")
    assert hit is not None and hit.rule == "rows"
    kept = ("Here is a table:\n\n" + head + body)[: hit.prune_offset]
    # cut at the streak of repeated rows: the first rows of the loop stay, hardly more
    assert len(kept.splitlines()) - 5 <= len(rows) + 2


def test_a_real_table_with_distinct_rows_streams_untouched():
    names = ["lock", "header", "frames", "tail", "backup", "undo", "marker", "title", "steps"]
    table = "| part | reads | writes |\n|---|---|---|\n" + "".join(
        f"| {name} {kind} | yes | no |\n" for kind in ("file", "cache", "log") for name in names
    )
    assert scan_text(table, "text") == []


def test_markdown_table_with_repeated_cells_is_not_a_loop():
    rows = "".join(
        f"| {name} | yes | yes | no | default |\n"
        for name in (
            "lock",
            "header",
            "frames",
            "seq",
            "tail",
            "backup",
            "undo",
            "marker",
            "title",
            "turns",
            "steps",
            "tools",
            "jobs",
            "retry",
            "usage",
            "stream",
        )
    )
    table = "| key | read | write | delete | source |\n|---|---|---|---|---|\n" + rows
    assert scan_text(table * 1, "text") == []
    assert stream(table, "text", sizes=(2, 3)) is None
