"""Rule redefined: one code fence writes the same definition a third time."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.detect_helpers import stream

from looprescue.config import DetectorConfig
from looprescue.detect.rules import redefined
from looprescue.detect.rules.redefined import is_definition

CHANNELS = ["text", "reasoning"]
# redefined's own verdict: the periodic rules cut copies that come back in a fixed order
ALONE = DetectorConfig(ignore=("cycle", "counter", "rehash", "drift", "reprise", "lines"))
SIZES = [(3,), (1, 7, 2), (64,)]

INTRO = "Here is the endpoint, with a helper for the connection.\n\n```python\n"
HEAD = "import sqlite3\nfrom flask import Flask, abort\n\napp = Flask(__name__)\n\n\n"
GET_DB = (
    "def get_db():\n    conn = sqlite3.connect(DB_PATH)\n    conn.row_factory = sqlite3.Row\n"
    "    return conn\n"
)
COMMENT = "# Open a new connection for each request\n"
ROUTE = (
    '@app.route("/users/<int:user_id>")\ndef get_user(user_id):\n'
    "    return get_db().execute(SQL, (user_id,)).fetchone()\n"
)


def _python_loop() -> str:
    # the helper again and again, a comment before some copies, the route now and then
    parts = [GET_DB, COMMENT + GET_DB, ROUTE, GET_DB, COMMENT + GET_DB, GET_DB, ROUTE, GET_DB]
    return INTRO + HEAD + "\n\n".join(parts) + "```\n"


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("sizes", SIZES)
def test_a_function_written_again_and_again_is_cut_after_its_first_copy(channel, sizes):
    text = _python_loop()
    first = text.index(GET_DB)
    hit = stream(text, channel, sizes=sizes, config=ALONE)
    assert hit is not None and hit.rule == "redefined", hit
    assert hit.loop_start == first
    assert hit.prune_offset == first + len(GET_DB)  # the helper is kept once
    # found as the third copy's last line ends
    third = text.index(GET_DB, text.index(GET_DB, first + 1) + 1)
    assert hit.fired_at == third + len(GET_DB)


@pytest.mark.parametrize(
    ("lang", "definition", "between"),
    [
        ("js", "function fetchUser(id) {\n  return api.get(`/users/${id}`);\n}\n", "// retry\n"),
        ("js", "const total = (items) => {\n  return items.reduce(add, 0);\n};\n", "\n"),
        ("go", "func (s *Server) Close() error {\n\treturn s.ln.Close()\n}\n", "// Close\n"),
        ("rust", "pub fn area(&self) -> f64 {\n    self.w * self.h\n}\n", "\n"),
        ("java", "public String getName() {\n    return name;\n}\n", "// getter\n"),
    ],
)
def test_definitions_in_other_languages_are_followed(lang, definition, between):
    text = f"Done:\n\n```{lang}\n" + (definition + "\n" + between) * 4 + "```\n"
    hit = stream(text, "text", config=ALONE)
    assert hit is not None and hit.rule == "redefined", hit
    assert hit.prune_offset == text.index(definition) + len(definition)


@pytest.mark.parametrize(
    "code",
    [
        # one method written alike in three classes: three definitions
        "".join(
            f"class {name}(Base):\n    def __init__(self):\n        super().__init__()\n"
            f"        self.items = []\n\n"
            for name in ("Cart", "Order", "Invoice")
        ),
        # an inner helper written alike inside three functions
        "".join(
            f"def task_{n}(func):\n    def inner(x):\n        return x + 1\n    return inner\n\n"
            for n in range(1, 5)
        ),
        # Java getters alike in three classes, braces and all
        "".join(
            f"class {name} {{\n    public String getName() {{\n        return name;\n    }}\n}}\n\n"
            for name in ("Cat", "Dog", "Cow")
        ),
        # a helper shown twice (two files in one fence), then used
        "# a.py\n" + GET_DB + "\n# b.py\n" + GET_DB + "\nconn = get_db()\n",
        # tests alike but for their values
        "".join(f"def test_add_{n}():\n    assert add({n}, 1) == {n + 1}\n\n" for n in range(8)),
        # a function rewritten with a fix each time
        "".join(
            f"def area(r):\n    return {pi} * r * r\n\n" for pi in ("3.14", "3.1416", "math.pi")
        ),
    ],
    ids=["method-in-classes", "inner-in-functions", "java-getters", "twice", "tests", "fixed"],
)
def test_definitions_alike_for_a_reason_are_left_alone(code):
    text = "Here it is:\n\n```\n" + code + "```\n"
    for sizes in SIZES:
        assert stream(text, "text", sizes=sizes, config=ALONE) is None


def test_each_fence_is_judged_alone():
    # the same file shown again after each change: its helper is unchanged every time
    versions = [HEAD + GET_DB + "\n" + f"PAGE_SIZE = {n}\n" for n in (10, 20, 50, 100)]
    text = "".join(f"Version {i}:\n\n```python\n{v}```\n\n" for i, v in enumerate(versions))
    assert stream(text, "text", config=ALONE) is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("def get_db():", True),
        ("async def fetch(url):", True),
        ("export default function App() {", True),
        ("func (s *Server) Close() error {", True),
        ("pub(crate) async fn run(&self) {", True),
        ("public static void main(String[] args) {", True),
        ("const add = (a, b) => a + b;", True),
        ("return get_db()", False),
        ("if (n == 0) {", False),
        ("class Cart(Base):", False),
        ("define the function later", False),
    ],
)
def test_what_opens_a_definition(line, expected):
    assert is_definition(line) is expected


_OPENERS = [*sorted(redefined._OPENING_WORDS), "functional", "classes", "enumerate", "x", "Def"]


@given(
    st.sampled_from(_OPENERS),
    st.text(alphabet=" \t*()<>[]$.,=:&{}_abcdefnstu", max_size=24),
)
def test_the_first_word_gate_passes_every_line_the_patterns_match(word, rest):
    # the gate only saves the patterns' work: a line either pattern matches always passes it
    line = word + rest
    if redefined._HEADER.match(line) or redefined._SCOPE.match(line):
        assert redefined._may_open(line)
