"""The generated parts of the docs are current: the configuration reference in docs/config.md
(from the config model) and the CLI reference (from the CLI). Run `make docs` when this fails."""

from __future__ import annotations

import re

import docgen
from docgen.config_keys import MEANINGS, SECTIONS
from typer.main import get_command

from looprescue.cli import app
from looprescue.config import LoopRescueConfig, config_from_mapping


def test_readme_and_cli_reference_are_current():
    assert docgen.stale() == [], "generated docs are stale: run `make docs`"


def test_every_config_key_has_a_meaning_and_every_meaning_a_key():
    keys = [key.path for key in docgen.config_keys()]
    assert len(keys) == len(set(keys)) and keys
    assert set(keys) == set(MEANINGS)
    assert {key.rpartition(".")[0] for key in keys} == set(SECTIONS)


def test_the_reference_gives_each_key_its_real_default():
    reference = docgen.config_reference()
    defaults = LoopRescueConfig()
    for key in docgen.config_keys():
        name = key.path.rpartition(".")[2]
        (row,) = [
            line
            for line in reference.splitlines()
            if line.startswith(f"| `{name}` ") and MEANINGS[key.path] in line
        ]
        value = defaults
        for part in key.path.split("."):
            value = getattr(value, part)
        shown = row.split(" | ")[1]
        if value is None:
            assert shown == "unset"
        else:
            # the default as written parses back to the model's default
            text = shown.strip("`")
            parsed = config_from_mapping(_nested(key.path, _yaml_value(text)))
            got = parsed
            for part in key.path.split("."):
                got = getattr(got, part)
            assert got == value, (key.path, shown)


def _yaml_value(text: str):
    import yaml

    return yaml.safe_load(text)


def _nested(path: str, value) -> dict:
    *parents, leaf = path.split(".")
    data: dict = {leaf: value}
    for part in reversed(parents):
        data = {part: data}
    return data


def test_the_cli_reference_holds_every_command_and_option():
    reference = docgen.cli_reference()
    root = get_command(app)
    for name, command in root.commands.items():
        assert f"## looprescue {name}\n" in reference
        section = reference.split(f"## looprescue {name}\n", 1)[1].split("\n## ", 1)[0]
        for param in command.params:
            for option in param.opts:
                if option.startswith("-"):
                    assert option in section, (name, option)


def test_the_readme_first_screen_shows_what_a_new_user_needs():
    """What it does, a rescued loop, the two set-up commands and the one-line starts, before
    any reference: the key reference lives in docs/config.md."""
    readme = (docgen.REPO / "README.md").read_text(encoding="utf-8")
    first_screen = readme[: readme.index("## Quick start")]
    assert len(first_screen.splitlines()) <= 60
    for needed in (
        "make demo",
        "make test",
        "pruned:",
        "DSH",
        "Claude Code",
        "Codex",
        "opencode",
        "looprescue.wrap(",
        "pip install -e '.[all]'",
    ):
        assert needed in first_screen, needed
    assert "| key | default |" not in readme and "docs/config.md" in readme
    config = (docgen.REPO / "docs" / "config.md").read_text(encoding="utf-8")
    for key in docgen.config_keys():
        assert f"| `{key.path.rpartition('.')[2]}` |" in config, key.path
    # links from the reference reach the pages beside it
    for target in re.findall(r"\]\(([a-z-]+\.md)", config):
        assert (docgen.REPO / "docs" / target).is_file(), target
