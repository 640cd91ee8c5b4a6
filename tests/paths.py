"""Locations of the repository and the read-only shared reference data."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
SESSIONS = SHARED / "dsh" / "sessions"
CORPUS = SHARED / "corpus" / "dev.jsonl"
SMOLLM2 = REPO_ROOT / "corpus" / "smollm2.jsonl"
