"""Locations of the repository and of the test data it ships."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# DSH sessions recorded with the real runtime by tests/fixtures/record.py
SESSIONS = REPO_ROOT / "tests" / "fixtures" / "sessions"
CORPUS = REPO_ROOT / "corpus" / "dev.jsonl"
SMOLLM2 = REPO_ROOT / "corpus" / "smollm2.jsonl"
