"""Benchmarks: run with ``make bench``; each ``bench_*.py`` module has a ``main()``."""
