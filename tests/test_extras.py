"""The base install is what `wrap()` needs; each feature names the extra it lacks.

Modules are made missing by an import hook in a child interpreter, so the real import paths
of the package are what is checked, without a venv per extra."""

from __future__ import annotations

import re
import subprocess
import sys

import tomllib
from tests.paths import REPO_ROOT

BLOCKER = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Missing())
sys.argv = sys.argv[2:]
"""
# what a plain `pip install looprescue` must not bring: the web server, the Redis client, the
# template engine, the terminal toolkit, the CLI framework, the demo's server
NOT_IN_BASE = ("starlette", "uvicorn", "redis", "jinja2", "rich", "typer", "httptools", "uvloop")


def without(modules: tuple[str, ...], code: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``code`` (with ``args`` as its argv) where ``modules`` cannot be imported."""
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + code, ",".join(modules), "looprescue", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def project() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\[<>=;! ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_base_install_brings_no_server_template_engine_or_terminal_toolkit():
    base = names(project()["dependencies"])
    assert not base & {m.replace("_", "-") for m in NOT_IN_BASE}
    extras = project()["optional-dependencies"]
    for extra in ("cli", "proxy", "redis", "report", "demo", "litellm", "all", "dev"):
        assert extra in extras, extra
    assert "jinja2" in names(extras["report"]) and "redis" in names(extras["redis"])
    assert "uvicorn" in names(extras["demo"]) and "looprescue" in names(extras["demo"])


def test_wrap_works_without_any_of_them():
    # a request goes through the wire codecs before it finds nothing listening on port 9
    code = (
        "import openai, looprescue\n"
        "raw = openai.OpenAI(api_key='x', base_url='http://127.0.0.1:9', max_retries=0)\n"
        "client = looprescue.wrap(raw)\n"
        "print(type(client).__name__)\n"
        "try:\n"
        "    client.chat.completions.create(model='m', messages=[], stream=True)\n"
        "except openai.APIConnectionError:\n"
        "    print('refused')\n"
    )
    result = without((*NOT_IN_BASE, "zstandard", "click"), code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["OpenAI", "refused"]


def test_each_feature_names_the_extra_it_lacks(tmp_path):
    cases = [
        (("typer",), ["--help"], "[cli]"),
        (("jinja2",), ["report", str(tmp_path), "-o", str(tmp_path / "r.html")], "[report]"),
        (("starlette",), ["proxy", "--upstream", "http://127.0.0.1:9"], "[proxy]"),
        (("uvicorn",), ["demo"], "[demo]"),
    ]
    (tmp_path / "--p--" / "s").mkdir(parents=True)
    (tmp_path / "--p--" / "s" / "session.v4.jsonl").write_text(
        '{"type":"session","version":4,"id":"session-x","createdAt":1}\n'
    )
    for missing, args, extra in cases:
        result = without(missing, "from looprescue.entry import main\nmain()\n", *args)
        assert result.returncode == 2, (missing, result.stderr)
        assert f"the {extra} extra installs" in result.stderr, result.stderr
        assert f"pip install -e '.{extra}'" in result.stderr
        assert "internal error" not in result.stderr
    litellm = without(("litellm",), "import looprescue.integrations.litellm\n")
    assert "the [litellm] extra installs" in litellm.stderr
