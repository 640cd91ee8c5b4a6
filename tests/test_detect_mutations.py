"""Each rule's Chinese path and each guard is held by a case that fails without it.

A mutation changes one line of the detector's source (a rule's handling of text without
spaces turned off, or a guard widened) in a copy of the package, and the cases are judged by
that copy in a child interpreter (a copy of the sources, never the compiled build: compiled,
constants are inlined and calls bound, so nothing could be patched in place). The cases pass
as the detector is, and at least one must fail with the mutation. So a change that drops a
rule's zh path or widens a guard cannot pass the suite.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "looprescue"

# name: (file under detect/, text, its replacement, the cases as (shape, seeds, lang, seps,
# channel), and whether the pool must fire within ~300 wide)
MUTATIONS = {
    # the pool counts a CJK char as two: without it a Chinese pool fires late
    "pool width": (
        "rules/pool.py",
        "cjk = 0 if sentence.isascii() else text_width(sentence) - len(sentence)",
        "cjk = 0",
        ("pool", range(2), "zh", ("none", "space", "newline"), "reasoning"),
        True,
    ),
    # a full stop without a space after it ends a Chinese sentence
    "full-width sentence end": (
        "text.py",
        'SENTENCE_END: Final = re.compile(r"[.!?。！？',
        'SENTENCE_END: Final = re.compile(r"[.!?',
        ("pool", range(2), "zh", ("none", "space", "newline"), "reasoning"),
        False,
    ),
    # renumbered counts a CJK item's width
    "renumbered width": (
        "rules/renumbered.py",
        "text_width(body) < SENTENCE_WIDTH",
        "len(body) < SENTENCE_WIDTH",
        ("numbered_item", range(2), "zh", ("none", "space", "newline"), "text"),
        False,
    ),
    # renumbered reads the marks Chinese text numbers its items with (12、, （十二）, 第十二条)
    "renumbered zh marks": (
        "rules/renumbered.py",
        "if labelled is None:\n            return None",
        "return None",
        ("numbered_item", range(8), "zh", ("none", "newline"), "text"),
        False,
    ),
    # the rules that read shape.text_width (renumbered, the periodic rules, stutter, restate)
    # count a CJK char as two
    "shared CJK width": (
        "shape.py",
        'NO_SPACES_SCRIPT: Final = re.compile(r"[\\u3040-\\u30ff\\u3400-\\u9fff\\uac00-\\ud7af]")',
        'NO_SPACES_SCRIPT: Final = re.compile(r"[\\x00]")',
        ("numbered_item", range(2), "zh", ("none", "space", "newline"), "text"),
        False,
    ),
    # the guard that calls a template of a few letters a chant of numbers, widened
    "tiny template guard": (
        "rules/counter.py",
        "TINY_TEMPLATE_LETTERS: Final = 4",
        "TINY_TEMPLATE_LETTERS: Final = 8",
        ("asked_list", range(8), "zh", ("none",), "text"),
        False,
    ),
    # drift reads a CJK char as a token: without it a Chinese paragraph has too few to count
    "drift CJK tokens": (
        "text.py",
        '|[0-9]+(?:\\.[0-9]+)?|[\\u3040-\\u30ff\\u4e00-\\u9fff]"\n)',
        '|[0-9]+(?:\\.[0-9]+)?"\n)',
        ("drifting", range(3), "zh", ("blank", "newline"), "reasoning"),
        False,
    ),
    # paragraphs that say other numbers are cases, not copies: widened, they are a loop
    "drift numbers guard": (
        "rules/drift.py",
        "if a.numbers != b.numbers and not _same_numbers(a.numbers, b.numbers):",
        "if False:",
        ("checked_cases", range(3), "zh", ("blank", "newline"), "reasoning"),
        False,
    ),
    # a counted template's copies must be equal but for the counter: widened, a long list of
    # new items is cut as one
    "counted template guard": (
        "rules/counted.py",
        "matched = template == chain.template",
        "matched = chain.template is not None",
        ("long_list", range(2), "en", ("newline",), "text"),
        False,
    ),
    # reprise leaves a block said again in its own order to the periodic rules: widened, one
    # letter sent to a few people is cut
    "reprise order guard": (
        "rules/reprise.py",
        "if MOVED_PER * self._window_moved < self._window_said:",
        "if self._window_moved < 0:",
        ("letters", range(3), "en", ("newline", "blank"), "reasoning"),
        False,
    ),
    # a block in its own order is a loop only when its lines are formulas or code: widened,
    # a letter to a few people is cut
    "reprise formal guard": (
        "rules/reprise.py",
        "if FORMULAS_OF * formal < FORMULAS_IN * len(said):",
        "if False:",
        ("letters", range(3), "en", ("newline", "blank"), "reasoning"),
        False,
    ),
    # a window of sentences alone, all said again, is a block said again with words changed:
    # drift keeps one copy of it, where pool would cut inside the second
    "pool whole window needs phrases": (
        "rules/pool.py",
        "if not self._run.has_recurring():",
        "if False:",
        ("drifting", range(962, 965), "zh", ("none",), "reasoning"),
        False,
    ),
    # a log's reading with a status line after some of them is a log as a reading alone is
    "counter readings with status lines": (
        "rules/counter.py",
        'and (shape not in ("item", "block") or not a_reading(',
        'and (shape != "item" or not a_reading(',
        ("readings", range(12), "en", ("blank",), "reasoning"),
        False,
    ),
    # lines that differ in their numbers alone are a log's readings
    "reprise shapes guard": (
        "rules/reprise.py",
        "< MIN_SHAPES:",
        "< 0:",
        ("readings", range(12), "en", ("blank",), "reasoning"),
        False,
    ),
    # rehash reads a CJK char as a token: without it a Chinese sentence has none, and one
    # said again in other words inside a paragraph goes through
    "rehash CJK tokens": (
        "text.py",
        '|[0-9]+(?:\\.[0-9]+)?|[\\u3040-\\u30ff\\u4e00-\\u9fff]"\n)',
        '|[0-9]+(?:\\.[0-9]+)?"\n)',
        ("restated", range(3), "zh", ("none", "space"), "text"),
        False,
    ),
    # a label of its own (``Thursday:``) makes a sentence an item of a list: widened, a
    # week's plan with the same routine every day is cut
    "rehash label guard": (
        "rules/rehash.py",
        "if unit.label and unit.label not in labels:",
        "if False:",
        ("routine", range(2), "en", ("newline",), "text"),
        False,
    ),
    # a connector that fills the slot of the one it copies with a new word names an item
    "rehash item guard": (
        "rules/rehash.py",
        "if stale and unit.head and not set(unit.head).isdisjoint(copied.head):",
        "if False:",
        ("alike_items", range(2), "en", ("space",), "text"),
        False,
    ),
    # a definition is compared in its place: without the enclosing headers, one method alike
    # in several classes is a function written again
    "redefined place": (
        "rules/redefined.py",
        'where = "\\n".join(outer for _, outer in opened)',
        'where = ""',
        ("methods_alike", range(2), "en", ("space",), "text"),
        False,
    ),
    # a sentence of openers strung by clause marks is read clause by clause: without it, a
    # Chinese pool of ``等等，嗯，`` is found late or never
    "pool openers": (
        "rules/pool.py",
        "        pieces = _short_clauses(sentence)\n",
        "        pieces = None\n",
        ("opener_pool", range(2), "zh", ("none", "random"), "reasoning"),
        True,
    ),
    # a clause of content is no opener: widened, one letter sent to a few people (``王芳，
    # 你好：`` and its sentences of clauses) is a pool
    "pool opener width": (
        "rules/pool.py",
        "OPENER_CHARS: Final = 10",
        "OPENER_CHARS: Final = 40",
        ("letters", range(2), "zh", ("none", "space"), "text"),
        False,
    ),
    # a fence shown again after a section of its own is no copy: widened, a guide whose every
    # section ends with the same snippet is cut
    "refenced remark guard": (
        "rules/refenced.py",
        "return second or self._said - said <= MAX_REMARK",
        "return True",
        ("snippet_sections", range(2), "en", ("space",), "text"),
        False,
    ),
}

# Run in the child: judge the cases with the package first on sys.path, print the problems.
CHILD = """
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from tests.support import loopgen
from tests.test_detect_matrix import cut_problem, time_problem, whole
shape, seeds, lang, seps, channel, tight = json.loads(sys.argv[3])
problems = []
for seed in seeds:
    for sep in seps:
        case = loopgen.make(shape, seed, lang, sep, channel)
        hit = whole(case)
        if not case.is_loop:
            problem = None if hit is None else f"healthy text cut by {hit.rule}"
        elif hit is None:
            problem = "loop not found"
        else:
            problem = cut_problem(case, hit) or time_problem(case, hit)
            wide = loopgen.width(case.text[case.onset : hit.fired_at])
            if problem is None and tight and wide > 300 + 3 * case.unit_width:
                problem = f"fired {wide} wide in"
        problems.append(problem)
print(json.dumps(problems))
"""


def _problems(src: Path, cases: tuple, tight: bool) -> list[str | None]:
    shape, seeds, lang, seps, channel = cases
    spec = json.dumps([shape, list(seeds), lang, list(seps), channel, tight])
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(src), str(ROOT), spec],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_mutation_is_caught(name: str, tmp_path: Path) -> None:
    path, text, mutated, cases, tight = MUTATIONS[name]
    src = tmp_path / "src"
    shutil.copytree(PACKAGE, src / "looprescue", ignore=shutil.ignore_patterns("*.so", "*.pyd"))
    assert all(p is None for p in _problems(src, cases, tight)), "the cases pass as it is"
    target = src / "looprescue" / "detect" / path
    source = target.read_text(encoding="utf-8")
    assert source.count(text) == 1, f"{name}: the line to change is not in {path}"
    target.write_text(source.replace(text, mutated), encoding="utf-8")
    assert any(p is not None for p in _problems(src, cases, tight)), f"{name}: nothing failed"
