"""``python -m docgen`` rewrites the generated parts of the docs; ``--check`` only says which
are stale (exit code 1)."""

from __future__ import annotations

import sys

from docgen import generated, stale


def main(argv: list[str]) -> int:
    if "--check" in argv:
        paths = stale()
        for path in paths:
            print(f"stale: {path} (run: python -m docgen)")
        return 1 if paths else 0
    for path, content in generated().items():
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            path.write_text(content, encoding="utf-8")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
