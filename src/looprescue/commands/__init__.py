"""CLI subcommands, one module each (see looprescue.cli)."""
