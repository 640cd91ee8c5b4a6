"""Run every benchmark module (``bench_*.py``) in name order, or the ones named on argv."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import benchmarks


def main(argv: list[str]) -> int:
    names = sorted(
        m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_")
    )
    if argv:
        names = [n for n in names if any(a in n for a in argv)]
    for name in names:
        print(f"== {name}", flush=True)
        importlib.import_module(f"benchmarks.{name}").main()
        print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
