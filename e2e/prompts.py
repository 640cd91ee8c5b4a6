"""The prompt set (corpus/prompts.yaml) and the sampling settings every run records."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = ROOT / "corpus" / "prompts.yaml"

# llama-cpp-python's own defaults for the samplers we do not study, written out so that every
# record names them; repeat_penalty 1.0 switches off llama.cpp's default penalty of 1.1, which
# would hide the loops a client without it gets.
BASE_SAMPLING = {"top_p": 0.95, "top_k": 40, "min_p": 0.05, "repeat_penalty": 1.0}
SEED = 1234


@dataclass(frozen=True)
class Prompt:
    id: str
    lang: str
    kind: str
    bait: bool
    prompt: str


def load_prompts(path: Path = PROMPTS) -> list[Prompt]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [Prompt(**item) for item in data["prompts"]]


def sampling(temperature: float, max_tokens: int) -> dict:
    return {**BASE_SAMPLING, "temperature": temperature, "seed": SEED, "max_tokens": max_tokens}
