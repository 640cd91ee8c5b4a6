"""Rule imports: a code fence whose import lines keep coming back."""

from __future__ import annotations

import pytest
from tests.detect_helpers import stream

from looprescue.detect import StreamDetector
from looprescue.detect.rules.imports import is_import

INTRO = "Here is the class you asked for, with its getters and setters:\n\n```java\n"
PLAUSIBLE = "import java.util.ArrayList;\nimport java.util.List;\nimport java.util.Map;\n"
BATCH = ["import java.util.ArraySet;\n", "import java.util.ListRef;\n", "import java.util.Set;\n"]


def _reshuffled(rounds: int) -> str:
    # the batch comes round again and again, in a changing order, with one new line now and then
    order = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (2, 1, 0)]
    lines = []
    for k in range(rounds):
        lines += [BATCH[i] for i in order[k % len(order)]]
        if k == 2:
            lines.append("import java.util.Arrays;\n")
    return "".join(lines)


def test_a_reshuffled_import_block_is_cut_where_its_batch_began():
    text = INTRO + PLAUSIBLE + _reshuffled(12) + "```\n"
    onset = len(INTRO + PLAUSIBLE)
    for sizes in ((3, 5, 2), (1,), (40,)):
        hit = stream(text, "text", sizes=sizes)
        assert hit is not None and hit.rule == "imports", (sizes, hit)
        assert hit.prune_offset == hit.loop_start == onset  # none of the batch is kept
        # fired at the fourth repeated line, the batch's first line there for the third time
        assert hit.fired_at <= onset + 3 * sum(map(len, BATCH)) + len("import java.util.Arrays;\n")


def test_python_imports_in_a_loop_fire_in_the_reasoning_channel_too():
    batch = "from os import path\nimport sys\nfrom typing import Any\n"
    text = "I will write the module.\n```python\nimport re\n" + batch * 6 + "```\n"
    hit = stream(text, "reasoning")
    assert hit is not None and hit.rule == "imports"
    assert hit.prune_offset == text.index("from os import path")


@pytest.mark.parametrize(
    "block",
    [
        # two files in one fence share their imports: each line twice, never a third time
        "// a.ts\nimport { a } from './a';\nimport { b } from './b';\nimport { c } from './c';\n"
        "import { d } from './d';\nexport const x = a + b + c + d;\n\n"
        "// b.ts\nimport { a } from './a';\nimport { b } from './b';\nimport { c } from './c';\n"
        "import { d } from './d';\nexport const y = a * b * c * d;\n",
        # a long, honest import block
        "".join(f"import java.util.{name};\n" for name in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
        # the same import in five functions, with code between: each run of imports is one line
        "".join(
            f"def {name}():\n    import os\n    return os.{attr}\n\n"
            for name, attr in zip("abcde", ["sep", "name", "cwd", "pid", "linesep"], strict=True)
        ),
    ],
)
def test_imports_a_program_writes_are_left_alone(block):
    text = "Here it is:\n\n```\n" + block + "```\n\nThat is all of it."
    assert stream(text, "text", sizes=(3, 5, 2)) is None


def test_import_lines_outside_a_fence_are_not_this_rule():
    prose = "".join(f"- import java.util.{name};\n" for name in ["Set", "List", "Map"] * 8)
    hit = stream("The imports it repeated were:\n\n" + prose + "That was the loop.", "text")
    assert hit is None or hit.rule != "imports"


def test_the_watermark_holds_import_lines_that_could_still_become_a_batch():
    detector = StreamDetector(watch="both")
    head = INTRO + PLAUSIBLE
    for piece in (head, BATCH[0], BATCH[1], "import java.ut"):
        assert detector.feed("text", piece) is None
    # the three plausible imports do not repeat soon: released; the batch may still be a loop
    held = detector.safe_offset("text")
    assert head.index("import java.util.ArrayList;") <= held <= len(head)
    assert detector.feed("text", "il.Set;\nimport java.util.ArraySet;\n") is None
    assert detector.safe_offset("text") <= len(head)
    # code that imports nothing ends the run, and all of it is released
    rest = "import java.util.ListRef;\n\npublic class Student {\n    private String name;\n"
    assert detector.feed("text", rest) is None
    total = len(head + BATCH[0] + BATCH[1] + "import java.util.Set;\nimport java.util.ArraySet;\n")
    assert detector.safe_offset("text") >= total + len(rest) - len("    private String name;\n")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("import java.util.List;", True),
        ("from os.path import join", True),
        ('#include "db.h"', True),
        ("#include <stdio.h>", True),
        ("using System.Text;", True),
        ("use std::collections::HashMap;", True),
        ("const fs = require('fs');", True),
        ("important = True", False),
        ("from the first day on", False),
        ("user_id = 3", False),
    ],
)
def test_what_counts_as_an_import_line(line, expected):
    assert is_import(line) is expected


def test_include_lines_looping_inside_a_fence_are_the_imports_rule():
    head = "#include <llvm/MC/MCAsmInfo.h>\n#include <llvm/MC/MCInst.h>\n"
    pair = "#include <llvm/Support/TargetSelect.h>\n#include <llvm/Support/TargetRegistry.h>\n"
    hit = stream("```cpp\n" + head + pair * 40, "text")
    # no program includes a header a third time: cut where the pair began, long before a
    # fenced cycle's twelve copies
    assert hit is not None and hit.rule == "imports"
    assert hit.prune_offset == len("```cpp\n" + head)
    assert hit.fired_at <= len("```cpp\n" + head) + 3 * len(pair) + 128
