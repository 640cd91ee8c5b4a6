"""The generated parts of the docs, so they cannot drift from the code:

* the configuration reference, docs/config.md, read from the config model (keys, types,
  ranges, defaults) and ``config_keys.MEANINGS`` (what each key means);
* the command table in README.md and the whole of docs/cli.md, read from the CLI itself.

``python -m docgen`` rewrites them; ``python -m docgen --check`` exits 1 when a copy is stale
(``tests/test_docs.py`` runs the same check).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel

from docgen.config_keys import MEANINGS, SECTIONS

REPO = Path(__file__).resolve().parents[1]
HELP_WIDTH = 100


# -- the configuration reference ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Key:
    path: str  # dotted, e.g. detector.poolWindow
    section: str  # "" for the top level
    values: str
    default: str


def config_keys(model: type[BaseModel] | None = None, prefix: str = "") -> Iterator[Key]:
    """Every leaf key of the config model, in the model's order."""
    if model is None:
        from looprescue.config import LoopRescueConfig

        model = LoopRescueConfig
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from config_keys(annotation, f"{prefix}{name}.")
            continue
        yield Key(
            path=prefix + name,
            section=prefix.rstrip("."),
            values=_values(annotation, field.metadata),
            default=_yaml(field.default),
        )


def _values(annotation: Any, metadata: list[Any]) -> str:
    """What a key accepts, in words: choices, a number range, a pattern."""
    optional = False
    if isinstance(annotation, UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [a for a in typing.get_args(annotation) if a is not NoneType]
        optional = len(members) < len(typing.get_args(annotation))
        annotation = members[0] if len(members) == 1 else annotation
    if typing.get_origin(annotation) is dict:
        value = typing.get_args(annotation)[1]
        if isinstance(value, type) and issubclass(value, BaseModel):
            inner = "`{" + ", ".join(value.model_fields) + "}`"
        else:
            inner = {float: "number", int: "integer", str: "string"}.get(value, str(value))
        return f"map of string to {inner}"
    if typing.get_origin(annotation) is Literal:
        text = " \\| ".join(f"`{choice}`" for choice in typing.get_args(annotation))
    elif typing.get_origin(annotation) is tuple:
        text = "list of strings"
    else:
        text = {bool: "`true` \\| `false`", int: "integer", float: "number", str: "string"}.get(
            annotation, str(annotation)
        )
        low = next(
            (m for m in metadata if isinstance(m, annotated_types.Ge | annotated_types.Gt)), None
        )
        high = next(
            (m for m in metadata if isinstance(m, annotated_types.Le | annotated_types.Lt)), None
        )
        if low is not None or high is not None:
            text += " " + _range(low, high)
    return text + (", or unset" if optional else "")


def _range(low: Any, high: Any) -> str:
    """``0 to 1000``, or with an open end ``> 0, ≤ 1``."""
    if isinstance(low, annotated_types.Ge) and isinstance(high, annotated_types.Le):
        return f"{_number(low.ge)} to {_number(high.le)}"
    parts = []
    if low is not None:
        parts.append(f"> {_number(low.gt)}" if hasattr(low, "gt") else f"≥ {_number(low.ge)}")
    if high is not None:
        parts.append(f"< {_number(high.lt)}" if hasattr(high, "lt") else f"≤ {_number(high.le)}")
    return ", ".join(parts)


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _yaml(value: Any) -> str:
    """A default as it is written in the YAML file."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, tuple | list):
        return "`[" + ", ".join(f'"{item}"' for item in value) + "]`"
    if isinstance(value, dict) and not value:
        return "`{}`"
    return f"`{_number(value) if isinstance(value, int | float) else value}`"


def config_reference() -> str:
    """The markdown tables of every key, one table per section."""
    by_section: dict[str, list[Key]] = {}
    for key in config_keys():
        by_section.setdefault(key.section, []).append(key)
    out = []
    for section, keys in by_section.items():
        title = f"`{section}:`" if section else "top level"
        out += [f"**{title}** {SECTIONS[section]}", "", "| key | default | values | meaning |"]
        out.append("|---|---|---|---|")
        for key in keys:
            name = key.path.removeprefix(f"{section}.") if section else key.path
            out.append(f"| `{name}` | {key.default} | {key.values} | {MEANINGS[key.path]} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# -- the CLI reference ----------------------------------------------------------------------


def _help(*args: str) -> str:
    from typer.testing import CliRunner

    from looprescue.cli import app

    result = CliRunner().invoke(
        app, [*args, "--help"], prog_name="looprescue", terminal_width=HELP_WIDTH
    )
    if result.exit_code != 0:
        raise RuntimeError(f"looprescue {' '.join(args)} --help failed: {result.output}")
    return result.output.rstrip() + "\n"


def _commands() -> list[tuple[str, str]]:
    """(name, one-line summary) of every command, in the CLI's order."""
    listing = _help().split("Commands:", 1)[1]
    rows = []
    for line in listing.strip().splitlines():
        name, summary = line.split(None, 1)
        rows.append((name, summary.strip()))
    return rows


def command_table() -> str:
    lines = ["| command | what it does |", "|---|---|"]
    for name, summary in _commands():
        lines.append(f"| [`looprescue {name}`](docs/cli.md#looprescue-{name}) | {summary} |")
    return "\n".join(lines) + "\n"


def cli_reference() -> str:
    """docs/cli.md: every command's --help exactly as the CLI prints it."""
    out = [
        "# Command line reference",
        "",
        "<!-- Generated from the CLI by `python -m docgen`; do not edit by hand. -->",
        "",
        "Every command's `--help`, as `looprescue` prints it (`-h` works too).",
        "",
        "```text",
        _help().rstrip(),
        "```",
    ]
    for name, _summary in _commands():
        out += ["", f"## looprescue {name}", "", "```text", _help(name).rstrip(), "```"]
    return "\n".join(out) + "\n"


# -- where the generated parts live ---------------------------------------------------------

BEGIN = "<!-- BEGIN generated: {name} (python -m docgen) -->"
END = "<!-- END generated: {name} -->"


def splice(text: str, name: str, content: str) -> str:
    """``text`` with the block between the markers ``name`` replaced by ``content``."""
    begin, end = BEGIN.format(name=name), END.format(name=name)
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"markers for {name!r} not found ({begin} … {end})")
    return pattern.sub(lambda _: f"{begin}\n{content}{end}", text, count=1)


def config_page() -> str:
    """docs/config.md: every key of the config, from the model and config_keys.MEANINGS."""
    out = [
        "# Configuration reference",
        "",
        "<!-- Generated from the config model by `python -m docgen`; do not edit by hand. -->",
        "",
        "One YAML file (`--config FILE`); `--set KEY=VALUE` overrides one key (a dotted path such",
        "as `detector.poolWindow`) on every command that reads the config, and the proxy's flags",
        "override both. An unknown key or a bad value stops the command with exit code 2, naming",
        "the key and the reason. The keys, section by section:",
        "",
        # the meanings link docs pages from the README's place; this page sits beside them
        config_reference().replace("](docs/", "]("),
    ]
    return "\n".join(out).rstrip() + "\n"


def generated() -> dict[Path, str]:
    """Every generated file with the content it should have."""
    readme = REPO / "README.md"
    text = readme.read_text(encoding="utf-8")
    text = splice(text, "commands", command_table())
    return {
        readme: text,
        REPO / "docs" / "cli.md": cli_reference(),
        REPO / "docs" / "config.md": config_page(),
    }


def stale() -> list[Path]:
    """The files whose generated parts are not current."""
    return [
        path
        for path, content in generated().items()
        if not path.exists() or path.read_text(encoding="utf-8") != content
    ]
