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
    ],
    ids=["one-line", "far-apart", "fixed", "twice"],
)
def test_fences_said_again_for_a_reason_are_left_alone(text):
    for sizes in SIZES:
        assert stream(text, "text", sizes=sizes, config=ALONE) is None
