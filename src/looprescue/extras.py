"""Which optional extra installs which module, and the error that says so.

The base install is what ``looprescue.wrap()`` needs; the command line, the proxy, Redis state,
the HTML report, the demo and the LiteLLM callback each come with an extra of their own
(pyproject.toml). A feature whose module is missing names the extra to install, from PyPI or
from a clone of the repository.
"""

from __future__ import annotations

# the top-level module -> the extra that installs it
EXTRA_OF = {
    "typer": "cli",
    "rich": "cli",
    "click": "cli",
    "zstandard": "cli",
    "msgspec": "cli",
    "httpx": "proxy",
    "starlette": "proxy",
    "httptools": "proxy",
    "uvloop": "proxy",
    "redis": "redis",
    "jinja2": "report",
    "uvicorn": "demo",
    "litellm": "litellm",
}


class MissingExtra(ModuleNotFoundError):
    """A feature's optional dependency is not installed; the message names the extra."""


def install_hint(extra: str) -> str:
    return (
        f"pip install 'looprescue[{extra}]' (from a clone of the repository: "
        f"pip install -e '.[{extra}]'; everything: '.[all]')"
    )


def missing_extra(exc: ModuleNotFoundError, what: str) -> MissingExtra | None:
    """The error to show for ``exc`` raised while loading ``what``, when an extra installs the
    missing module; None for any other missing module (a bug, or a broken install)."""
    if isinstance(exc, MissingExtra):
        return exc
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_OF.get(top)
    if extra is None:
        return None
    error = MissingExtra(
        f"{what} needs the module {top!r}, which the [{extra}] extra installs: "
        + install_hint(extra),
        name=exc.name,
    )
    return error
