"""Rule lines: short lines that keep duplicating, confirmed by a second window."""

from __future__ import annotations

import random

from tests.detect_helpers import derivation

from looprescue.config import DetectorConfig
from looprescue.detect import StreamDetector, scan_text
from looprescue.detect.rules.lines import LinesRule

SHORT_LINES = [
    f"check {name}"
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
        "blocks",
        "ids",
        "time",
        "cwd",
    )
]


def _feed(rule: LinesRule, lines: list[str], offset: int = 0):
    """Feed lines to the rule; return (hit, index of the line that fired)."""
    for index, line in enumerate(lines):
        hit = rule.on_line(line, offset, offset + len(line) + 1)
        offset += len(line) + 1
        if hit is not None:
            return hit, index
    return None, None


def test_warning_then_confirmation_fifty_lines_later():
    rng = random.Random(2)
    lines = [rng.choice(SHORT_LINES) for _ in range(300)]
    hit, index = _feed(LinesRule("text", DetectorConfig()), lines)
    assert hit is not None and hit.rule == "lines"
    # the first full window (line 50) warns; a matching window >= 50 lines later confirms
    assert 99 <= index < 120
    assert hit.prune_offset < hit.fired_at


def test_one_matching_window_alone_never_fires():
    rng = random.Random(4)
    looping = [rng.choice(SHORT_LINES) for _ in range(60)]
    recovered = [f"the {w} stage finished and wrote its report" for w in range(200)]
    hit, _ = _feed(LinesRule("text", DetectorConfig()), looping + recovered)
    assert hit is None


def test_long_lines_do_not_count_as_short_line_repetition():
    rng = random.Random(6)
    long_lines = [
        f"{line} and then verify the result against the stored copy" for line in SHORT_LINES
    ]
    hit, _ = _feed(
        LinesRule("text", DetectorConfig()), [rng.choice(long_lines) for _ in range(300)]
    )
    assert hit is None  # median length > 20: not this rule's business


def test_symbol_only_lines_are_not_counted():
    # A long run of separators and closing braces is structure, not a loop.
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]
    body = "".join(
        f"the {a} part follows {b} and precedes {c}\n}}\n----\n|---|\n"
        for a in words
        for b in words[:3]
        for c in words[4:6]
    )
    assert scan_text(body, "text") == []
    assert scan_text(body, "reasoning") == []


def test_log_with_a_recurring_warning_between_changing_metrics():
    rng = random.Random(3)
    lines = []
    for epoch in range(1, 40):
        loss = 3000 - epoch * 37.3 + rng.random() * 9
        lines.append(f"Epoch {epoch}/40")
        lines.append(
            f"{rng.randint(1, 4)}/4 - {rng.randint(1, 900)}ms/step - loss: {loss:.4f} - "
            f"mae: {loss / 61:.4f}WARNING:absl:You are saving your model as an HDF5 file via "
            "`model.save()`. This file format is considered legacy. We recommend using instead "
            "the native Keras format, e.g. `model.save('my_model.keras')`."
        )
        lines.append(f"val_loss: {loss * 0.97:.4f} - learning_rate: {0.001 / epoch:.6f}")
    log = "\n".join(lines) + "\n"
    assert scan_text(log, "text") == []
    assert scan_text(log, "reasoning") == []


def test_song_with_refrains_in_both_channels():
    chorus = "Nevermore, nevermore,\nSaid the raven at my door,\nNevermore, nevermore.\n"
    verses = [
        "Once upon a midnight dreary, while I pondered, weak and weary,\n"
        "Over many a quaint and curious volume of forgotten lore,\n",
        "Ah, distinctly I remember it was in the bleak December,\n"
        "And each separate dying ember wrought its ghost upon the floor.\n",
        "Eagerly I wished the morrow; vainly I had sought to borrow\n"
        "From my books surcease of sorrow, sorrow for the lost Lenore,\n",
        "And the silken, sad, uncertain rustling of each purple curtain\n"
        "Thrilled me, filled me with fantastic terrors never felt before;\n",
    ]
    song = "".join(v + chorus + "\n" for v in verses)
    assert scan_text(song, "text") == []
    assert scan_text(song, "reasoning") == []


def _lag_after_each_delta(text: str, channel: str = "text", size: int = 3) -> list[int]:
    from looprescue.detect import StreamDetector

    detector = StreamDetector(DetectorConfig())
    lags = []
    for start in range(0, len(text), size):
        detector.feed(channel, text[start : start + size])
        lags.append(min(len(text), start + size) - detector.safe_offset(channel))
    return lags


def test_a_heading_is_released_as_the_paragraph_under_it_streams():
    """A prose line past twice the median limit ends the run of short lines when it ends, and
    no line of the run came twice: the heading above it need not wait for its end."""
    heading = "### Team Setup:\n"
    first = "Kickball is played by two teams on a field with four bases. "
    last = "Each team takes turns kicking a rolled ball and running the bases"
    lags = _lag_after_each_delta("Here is how the game goes.\n\n" + heading + first + last)
    # once the first sentence ended, only the unfinished last one may be held
    assert lags[-1] <= len(last)


def test_a_heading_is_released_as_a_new_list_item_under_it_streams():
    """A new list item past twice the median limit ends the run of short lines when it ends,
    as a long prose line does (new text, whatever its markup): the heading above it goes out
    while the item is written."""
    item = "- " + "each team fields nine players and a pitcher who rolls the ball " * 2
    text = "Here is how the game goes.\n\n### Team Setup:\n" + item
    lags = _lag_after_each_delta(text)
    assert lags[-1] < len(item) - 40


def test_a_heading_stays_held_over_a_list_item_said_before():
    """An item that begins like one said before may be a block said again, which breaks
    nothing: the heading above it could open the run of short lines the loop goes on with."""
    item = "- each team fields nine players and a pitcher who rolls the ball\n"
    text = "Here is how the game goes.\n\n### Team Setup:\n" + item + "\n### Rules:\n" + item
    lags = _lag_after_each_delta(text[:-3])
    assert lags[-1] >= len("### Rules:\n" + item) - 3


def _cut_after_a_structure_line(before: list[str], item_chars: int) -> tuple[int, int]:
    """Where the rule cuts short lines said again and again, fed after ``before`` and a
    structure line of ``item_chars``; and where the lines after it begin."""
    from looprescue.detect.text import STRUCTURE_LINE

    rng = random.Random(5)
    rule = LinesRule("text", DetectorConfig())
    assert _feed(rule, before) == (None, None)
    offset = sum(len(line) + 1 for line in before)
    assert rule.on_line(STRUCTURE_LINE, offset, offset + item_chars + 1) is None
    offset += item_chars + 1
    hit, _ = _feed(rule, [rng.choice(SHORT_LINES[:5]) for _ in range(300)], offset)
    assert hit is not None
    return hit.prune_offset, offset


def test_a_long_new_structure_line_ends_a_run_with_nothing_said_twice():
    # past twice the median limit it is new text, as a long prose line is: the lines before
    # it are no part of the batch after it
    cut, after = _cut_after_a_structure_line(SHORT_LINES[:4], 70)
    assert cut >= after
    # a short one only comes between the run's lines: the cut falls among those before it
    cut, after = _cut_after_a_structure_line(SHORT_LINES[:4], 30)
    assert cut < after - 31
    # once a line came twice a batch may be forming, and a block of it said again may hold a
    # new item (a meal plan whose days repeat but for one dish): the cut still reaches back
    cut, after = _cut_after_a_structure_line(SHORT_LINES[:4] + SHORT_LINES[:2], 70)
    assert cut < after - 71


def test_a_formula_is_no_line_of_a_run():
    # Equations are short lines, but a run of short lines that keep duplicating is made of
    # words: a derivation whose word lines recur (So:, Simplify:) is not held as such a run.
    text = derivation(5)
    for channel in ("reasoning", "text"):
        detector = StreamDetector(watch="both")
        held = 0
        for at in range(0, len(text), 3):
            detector.feed(channel, text[at : at + 3])
            held = max(held, min(at + 3, len(text)) - detector.safe_offset(channel))
        assert held < 120, channel
    # duplicated short lines of words between the formulas still make a run
    rule = LinesRule("reasoning", DetectorConfig())
    rng = random.Random(2)
    lines = [rng.choice(SHORT_LINES[:5]) if k % 4 else f"x = {k}" for k in range(200)]
    hit, _ = _feed(rule, lines)
    assert hit is not None
