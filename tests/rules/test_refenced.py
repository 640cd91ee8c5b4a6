"""Rule refenced: the same code fence written a third time, little else between."""

from __future__ import annotations

import pytest
from tests.detect_helpers import stream

from looprescue.config import DetectorConfig

CHANNELS = ["text", "reasoning"]
# refenced's own verdict: the periodic rules cut copies that come back in a fixed order
ALONE = DetectorConfig(ignore=("cycle", "counter", "rehash", "drift", "reprise", "lines"))
SIZES = [(3,), (1, 7, 2), (64,)]

COMMAND = "```bash\n$ docker build -t api:dev .\n```\n\n"
OUTPUT = (
    "```\n[4/6] RUN pip install --no-cache-dir -r requirements.txt\n"
    "  error: subprocess-exited-with-error\n  Error: pg_config executable not found.\n"
    "ERROR: failed to solve: exit code: 1\n```\n"
)
REMARKS = [
    "The build still fails. Running it again.",
    "The build failed at the dependency step. Let me run it again to see the full output.",
    "Still failing. One more try.",
]
ZH_REMARKS = ["构建还是失败了，再运行一次。", "依赖这一步又失败了，我再跑一遍看看完整输出。"]


def _retries(remarks: list[str], copies: int) -> tuple[str, int]:
    """An agent's command and its error, again and again with a remark between; and where
    the first error output's fence ends."""
    head = "The base image moved to Python 3.12. Let me run the build CI runs.\n\n"
    text = head + COMMAND + OUTPUT
    first_end = len(text)
    for n in range(copies - 1):
        text += "\n" + remarks[n % len(remarks)] + "\n\n" + COMMAND + OUTPUT
    return text, first_end


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("remarks", [REMARKS, ZH_REMARKS], ids=["en", "zh"])
def test_a_command_and_its_error_again_and_again_are_cut_after_the_first_run(
    channel, sizes, remarks
):
    text, first_end = _retries(remarks, 6)
    hit = stream(text, channel, sizes=sizes, config=ALONE)
    assert hit is not None and hit.rule == "refenced", hit
    assert hit.prune_offset == first_end  # the first run's output is kept
    assert hit.loop_start == text.index("[4/6]")
    # found in the third output, as soon as it is as long as the first
    third = text.index("[4/6]", text.index("[4/6]", hit.loop_start + 1) + 1)
    assert third < hit.fired_at < third + len(OUTPUT)


ONE_LINE_REMARKS = {
    "en": ["Let me check the file again.", "The build still seems to fail. Let me check again.",
           "Let me check the file again.", "Let me check the file again.", "One more build."],
    "zh": ["让我再检查一下文件。", "构建好像还是失败了，让我再检查一下文件。",
           "让我再检查一下文件。", "让我再检查一下文件。", "再试一次构建。"],
}  # fmt: skip


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_one_command_run_again_and_again_between_remarks_is_cut_after_the_first(
    channel, sizes, lang
):
    fence = "```bash\nnpm run build\n```\n"
    head = "Renamed the file. Now rebuild:\n\n"
    remarks = ONE_LINE_REMARKS[lang] * 4
    text = head + fence
    first_end = len(text)
    for remark in remarks:
        text += f"\n{remark}\n\n{fence}"
    hit = stream(text, channel, sizes=sizes, config=ALONE)
    assert hit is not None and hit.rule == "refenced", hit
    assert hit.prune_offset == first_end and hit.loop_start == len(head) + len("```bash\n")
    # found at the fifth copy: the third and the fourth came after nothing new
    fifth = head + fence + "".join(f"\n{r}\n\n{fence}" for r in remarks[:3])
    assert len(fifth) < hit.fired_at < len(fifth) + 60
    # four copies are not yet a loop
    assert stream(fifth + "\nDone: the build passes.\n", channel, config=ALONE) is None


def test_a_function_written_again_in_a_fence_of_its_own_each_time_is_cut():
    code = (
        "```python\ndef dedupe(items):\n    seen = set()\n"
        "    return [x for x in items if not (x in seen or seen.add(x))]\n```\n"
    )
    text = "Here is the function.\n\n" + code + "\nLet me write it once more, cleanly.\n\n" + code
    text += "\nHere it is again.\n\n" + code
    hit = stream(text, "text", config=ALONE)
    assert hit is not None and hit.rule == "refenced"
    assert hit.prune_offset == text.index(code) + len(code)


DEDUPE = (
    "def dedupe(items):\n"
    '    """Drop repeats, keep the order."""\n'
    "    seen = set()\n    result = []\n    for item in items:\n"
    "        if item not in seen:\n            seen.add(item)\n            result.append(item)\n"
    "    return result\n"
)
# versions of it a looping model writes between its copies: a name changed, a comment added
RENAMED = DEDUPE.replace("dedupe", "remove_duplicates")
COMMENTED = DEDUPE.replace("    for item", "    # the first sighting wins\n    for item")


def _fenced(code: str) -> str:
    return "```python\n" + code + "```\n"


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("sizes", SIZES)
def test_a_function_said_again_among_near_copies_is_cut_after_the_first_version(channel, sizes):
    # the copies of each version come between copies of the others, so none comes soon after
    # its own latest copy; the run of near-copies is what holds them together
    head = "A set remembers what was seen, so one pass keeps the first of each item.\n\n"
    remarks = ["Here is the complete function again:", "Final code:", "Updated code:"]
    versions = [DEDUPE, RENAMED, COMMENTED, DEDUPE, RENAMED, COMMENTED, DEDUPE, RENAMED]
    text = head + "Here's the function:\n\n" + _fenced(versions[0])
    first_end = len(text)
    for n, code in enumerate(versions[1:]):
        text += f"\nExample: `dedupe([3, 1, 3])` gives `[3, 1]`.\n\n{remarks[n % 3]}\n\n"
        text += _fenced(code)
    hit = stream(text, channel, sizes=sizes, config=ALONE)
    assert hit is not None and hit.rule == "refenced", hit
    assert hit.prune_offset == first_end  # the first version is kept
    third = text.index(DEDUPE, text.index(DEDUPE, first_end) + 1)
    assert third < hit.fired_at <= third + len(DEDUPE)


def test_remarks_said_before_are_nothing_new_between_copies():
    # three sentences between the copies, all of them said before after the first copy
    code = _fenced("def area(r):\n    return math.pi * r * r\n")
    between = "Let me check r = 2: 4π, about 12.57. Good. So the final code is:\n\n"
    text = "The area of a circle.\n\n" + code + ("\n" + between + code) * 4
    hit = stream(text, "reasoning", config=ALONE)
    assert hit is not None and hit.rule == "refenced"
    assert hit.prune_offset == text.index(code) + len(code)
    # new remarks of the same length each time are a worked answer, not a loop
    fresh = [
        "Let me check r = 2: 4π. That is about 12.57. So the code holds:",
        "Now r = 0 gives 0. The edge case is fine. Here it is for reference:",
        "Negative r squares to a positive. Validation belongs to the caller. The code:",
        "Floats work too. Nothing else to change. Once more, the code:",
    ]
    worked = "The area of a circle.\n\n" + code
    worked += "".join("\n" + remark + "\n\n" + code for remark in fresh)
    assert stream(worked, "reasoning", config=ALONE) is None


VALID = (
    "def is_valid(s):\n"
    "    # {comment}\n"
    '    parts = s.split(".")\n'
    "    if len(parts) != 4:\n"
    "        return False\n"
    "    for {name} in parts:\n"
    "        if not {name}.isdigit() or int({name}) > 255:  # {why}\n"
    "            return False\n"
    "    return True\n"
)
WORDS = [
    ("Split into octets", "part", "out of range"),
    ("Break the string into octets", "chunk", "not a byte"),
    ("Split into octets", "p", "out of range"),
    ("Four octets expected", "part", "too big"),
]


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("sizes", SIZES)
def test_code_written_again_with_a_name_and_its_comments_changed_is_cut(channel, sizes):
    # each copy renames the loop's name and rewords its comments: the same code again
    remarks = ["Here is the final version:", "Updated version:", "Here's the updated code:"]
    text = "Check each octet.\n\n"
    first_end = -1
    for n in range(7):
        comment, name, why = WORDS[n % len(WORDS)]
        code = VALID.format(comment=comment, name=name, why=why)
        text += (remarks[n % 3] if n else "Here's the implementation:") + "\n\n" + _fenced(code)
        first_end = len(text) if n == 0 else first_end
        text += "\nThis rejects empty parts and values above 255.\n\n"
    hit = stream(text, channel, sizes=sizes, config=ALONE)
    assert hit is not None and hit.rule == "refenced", hit
    assert hit.prune_offset == first_end  # the first version is kept


@pytest.mark.parametrize(
    "names",
    [
        # three names changed at once: other code, however alike its shape
        [("part", "is_valid", "s", "parts"), ("chunk", "is_valid", "t", "pieces"),
         ("p", "is_valid", "u", "bits")],
        # the function itself renamed: another version of its API
        [("part", "is_valid", "s", "parts"), ("part", "valid_ipv4", "s", "parts"),
         ("part", "check", "s", "parts")],
    ],
    ids=["three-names", "function"],
)  # fmt: skip
def test_code_with_more_changed_than_a_name_or_two_is_other_code(names):
    text = "Check each octet.\n\n"
    for loop, func, arg, parts in names:
        code = VALID.format(comment="Split", name=loop, why="range")
        code = code.replace("is_valid", func).replace("(s)", f"({arg})")
        code = code.replace("s.split", f"{arg}.split").replace("parts", parts)
        text += "Next:\n\n" + _fenced(code)
    assert stream(text, "text", config=ALONE) is None


def test_short_fences_of_other_commands_are_no_copies():
    # a few commands each: all their words are names, and they differ in a name or two
    runs = [("api", "lint"), ("web", "test"), ("cli", "build"), ("docs", "serve")]
    text = "".join(
        f"Now the {pkg} package:\n\n```bash\ncd {pkg}\nnpm install\nnpm run {task}\n```\n\n"
        for pkg, task in runs
    )
    assert stream(text, "text", config=ALONE) is None


SECTIONS = [
    "Clone the repository and create a virtual environment in its root. The tests expect the "
    "package installed in editable mode, so your changes are picked up without a reinstall, "
    "and the fixtures live in the tests folder beside the modules they check.",
    "Open a second terminal for the development server. It reloads on every save, but it reads "
    "the environment only at start, so a new variable in the dotenv file needs a restart; the "
    "log shows the port it bound and the database it found.",
    "Run the migrations before the first request. They create the tables from the models and "
    "seed two users, an admin and a guest, whose passwords the seed script prints once; keep "
    "them, since the script will not print them again.",
    "Build the documentation last. The site generator reads the docstrings of the public "
    "modules, so a function without one shows up as a bare signature; the build warns about "
    "each, and the warnings are worth fixing before a release.",
]


@pytest.mark.parametrize(
    "text",
    [
        # a one-line call quoted again and again while an edit is planned
        "".join(
            f"Call site {n}:\n```ts\nheaders: {{ ...chatHeaders(credential, userAgent) }},\n```\n"
            "It must pass the client version too.\n\n"
            for n in range(4)
        ),
        # the same, at six call sites, each said what to do there
        "".join(
            f"Call site {n} is the {place} client, which builds its own headers:\n"
            "```ts\nheaders: { ...chatHeaders(credential, userAgent) },\n```\n"
            "It must pass the client version too.\n\n"
            for n, place in enumerate(["web", "CLI", "SDK", "worker", "admin", "mobile"])
        ),
        # one snippet shown again in each section, a page of text between
        "".join(
            f"## Step {n}\n\n{words}\n\n"
            "```bash\nsource .venv/bin/activate\npip install -e .\n```\n\n"
            for n, words in enumerate(SECTIONS)
        ),
        # a function fixed from one fence to the next
        "".join(
            f"Try {n}:\n```python\ndef area(r):\n    return {pi} * r * r\n```\n"
            for n, pi in enumerate(["3.14", "3.1416", "math.pi", "math.tau / 2"])
        ),
        # the same code twice: a before and an after that did not change
        "Before:\n```python\nx = load()\nprint(x)\n```\n"
        "After:\n```python\nx = load()\nprint(x)\n```\n",
        # versions of a fix, one of them taken up again once: no third copy of any
        "".join(
            "Next:\n" + _fenced(code)
            for code in [DEDUPE, RENAMED, DEDUPE, COMMENTED, COMMENTED.replace("set()", "{}")]
        ),
        # one environment's resources after another, written out as asked: a name and the
        # strings that name the environment change
        "".join(
            f"### {env}\n\n```hcl\n"
            f'resource "aws_s3_bucket" "logs_{env}" {{\n  bucket = "acme-logs-{env}"\n\n'
            f'  tags = {{\n    Environment = "{env}"\n    Purpose     = "logs"\n  }}\n}}\n\n'
            f'resource "aws_s3_bucket_versioning" "logs_{env}" {{\n'
            f"  bucket = aws_s3_bucket.logs_{env}.id\n}}\n```\n\n"
            for env in ("dev", "staging", "prod", "sandbox")
        ),
        # an edit and the test run after it, again and again, the output new each time
        "".join(
            "Edit:\n"
            + _fenced(f"LIMIT = {n}\nassert LIMIT > 0\n")
            + f"Run:\n```\n$ pytest -q\nFAILED test_limit - assert {n} == 9\n```\n"
            for n in range(5)
        ),
    ],
    ids=[
        "one-line",
        "call-sites",
        "far-apart",
        "fixed",
        "twice",
        "revisited",
        "environments",
        "edit-and-run",
    ],
)
def test_fences_said_again_for_a_reason_are_left_alone(text):
    for sizes in SIZES:
        assert stream(text, "text", sizes=sizes, config=ALONE) is None
