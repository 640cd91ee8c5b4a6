"""Locations of the repository and of the test data it ships."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SESSIONS = REPO_ROOT.parent / "shared" / "dsh" / "sessions"
CORPUS = REPO_ROOT / "corpus" / "dev.jsonl"
SMOLLM2 = REPO_ROOT / "corpus" / "smollm2.jsonl"
