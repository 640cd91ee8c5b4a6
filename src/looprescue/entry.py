"""The ``looprescue`` program: the command line, or one line saying which extra it needs."""

from __future__ import annotations

import sys

from looprescue.extras import missing_extra


def main() -> None:
    try:
        from looprescue.cli import main as cli_main
    except ModuleNotFoundError as exc:
        error = missing_extra(exc, "the looprescue command")
        if error is None:
            raise
        sys.stderr.write(f"looprescue: {error}\n")
        raise SystemExit(2) from None
    cli_main()
