"""Guards against false positives: structure and legitimate repetition never fire."""

from __future__ import annotations

import random

from tests.detect_helpers import stream

from looprescue.detect import scan_text

PHRASES = ["OK.", "Go.", "Now.", "Output.", "Let me write."]


def _reshuffled_lines(prefix: str, count: int = 150, seed: int = 1) -> str:
    rng = random.Random(seed)
    return "".join(f"{prefix}{rng.choice(PHRASES)}\n" for _ in range(count))


def test_list_items_table_rows_and_quotes_do_not_count_in_text():
    for prefix in ("- ", "* ", "1. ", "| ", "> "):
        body = _reshuffled_lines(prefix)
        assert scan_text(body, "text") == [], prefix
    # the same phrases as plain reasoning sentences are a pool loop
    assert scan_text(_reshuffled_lines(""), "reasoning")[0].rule == "pool"
    assert scan_text(_reshuffled_lines(""), "text")[0].rule == "pool"


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


CODE_BLOCK = (
    "    handle = open_log(path)\n"
    "    for event in handle.events():\n"
    "        if event['type'] == 'tool/call':\n"
    "            calls.append(canonical(event['data']['arguments']))\n"
    "    handle.close()\n"
    "    assert calls == expected, describe(calls)\n"
    "    counts[path.name] = len(calls)\n"
)


def test_repetitive_code_in_a_fence_is_held_to_a_stricter_threshold():
    block = CODE_BLOCK * 4  # four identical blocks, ~920 chars
    assert 600 < len(block) < 1200
    fenced = "Here are the four checks:\n```python\n" + block + "```\nAll four pass.\n"
    assert scan_text(fenced, "text") == []
    # outside a fence the same repetition is verbatim copies of >= 600 chars: a loop
    bare = "Here are the four checks:\n" + block + "All four pass.\n"
    assert scan_text(bare, "text")[0].rule == "cycle"


def test_a_real_loop_inside_a_fence_is_still_caught():
    head = "#include <llvm/MC/MCAsmInfo.h>\n#include <llvm/MC/MCInst.h>\n"
    pair = "    llvm::InitializeAllTargets();\n    llvm::InitializeAllAsmPrinters();\n"
    fenced = stream("```cpp\n" + head + pair * 40, "text")
    bare = stream("Includes:\n" + head + pair * 40, "text")
    assert fenced is not None and fenced.rule == "cycle" and fenced.period == len(pair)
    assert bare is not None and bare.period == len(pair)
    # a two-line block fires after 4 copies, inside a fence after codeFenceRepeatFactor (3) x 4
    fenced_copies = (fenced.fired_at - fenced.loop_start) / len(pair)
    bare_copies = (bare.fired_at - bare.loop_start) / len(pair)
    assert 3.5 <= bare_copies < 4 + 128 / len(pair) + 0.5  # judged at the next checkpoint
    assert fenced_copies >= 11.5


def test_include_lines_looping_inside_a_fence_are_the_imports_rule():
    head = "#include <llvm/MC/MCAsmInfo.h>\n#include <llvm/MC/MCInst.h>\n"
    pair = "#include <llvm/Support/TargetSelect.h>\n#include <llvm/Support/TargetRegistry.h>\n"
    hit = stream("```cpp\n" + head + pair * 40, "text")
    # no program includes a header a third time: cut where the pair began, long before a
    # fenced cycle's twelve copies
    assert hit is not None and hit.rule == "imports"
    assert hit.prune_offset == len("```cpp\n" + head)
    assert hit.fired_at <= len("```cpp\n" + head) + 3 * len(pair) + 128


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


def test_a_list_of_short_answers_that_repeat_is_not_a_loop():
    # answers to a numbered checklist: a short word may repeat item after item
    for word in ("Yes", "是", "N/A", "Done."):
        answers = "".join(f"{n}. {word}\n" for n in range(1, 9))
        text = "Checklist answers:\n" + answers + "9. No\n\nAll checks done."
        assert scan_text(text, "text") == [], word


def test_renumbered_list_is_not_a_loop():
    steps = [
        "Back up the session file.",
        "Check that DSH is not running.",
        "Run the cleaner with --dry-run.",
        "Read the diff it prints.",
        "Run it again without --dry-run.",
        "Resume the session.",
    ]
    first = "".join(f"{i}. {s}\n" for i, s in enumerate(steps, 1))
    again = "".join(f"{i}. {s}\n" for i, s in enumerate(steps, 7))
    text = (
        "The procedure:\n" + first + "\nAnd for the second session, continuing the count:\n" + again
    )
    assert scan_text(text, "text") == []
    assert scan_text(text, "reasoning") == []


def test_a_chinese_enumeration_is_words_not_a_chant_of_numbers():
    # four CJK chars say as much as eight letters: 用户编号 N counted up is an enumeration a
    # user asks for, where t1t2t3 is a chant
    text = "下面是编号列表。\n\n" + "".join(f"{i}. 用户编号 {i}\n" for i in range(1, 51))
    assert scan_text(text, "text") == []
    assert scan_text(text, "reasoning") == []
