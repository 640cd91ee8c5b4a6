"""Replay the continuations of a ``make e2e`` run against the model, with the correction as it
was sent and as the current code writes it.

A continuation's first words decide whether a small model finishes: this measures a change of
the correction text without the rest of the run moving. For every prompt of a client log
(``e2e/out/client-<stamp>.jsonl``) that was resumed, its first continuation request is sent
again, streamed nowhere and judged by nothing: once as the log has it, once with its last
user message replaced by what ``rescue.marker.correction`` writes now, at each seed given.
Sampling is the retry settings' (``--set`` as for ``make e2e``) over the corpus's, with the
budget the continuation had (700 tokens minus the first attempt's). Prints per variant and
seed how many answers ended with ``stop`` and the tokens they took.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from e2e.model import MODEL_ALIAS, install, serve, stop_on_sigterm
from e2e.prompts import BASE_SAMPLING, ROOT, SEED
from looprescue.commands.common import parse_settings
from looprescue.config import load_config
from looprescue.rescue.continuation import LoopSummary
from looprescue.rescue.conversation import conversation_language, uses_tools
from looprescue.rescue.marker import correction

VARIANTS = ("as sent", "current")


def first_continuation(record: Mapping[str, Any]) -> list[dict] | None:
    """The messages of a logged prompt's first continuation (None: it was not resumed)."""
    upstream = record.get("upstream") or []
    return upstream[1]["messages"] if len(upstream) > 1 else None


def with_current_correction(messages: list[dict]) -> list[dict]:
    """``messages`` with the last user turn (the correction) as the current code writes it."""
    body = {"messages": messages[:-1]}
    kept_text = len(messages) >= 2 and messages[-2].get("role") == "assistant"
    lang = conversation_language({"messages": messages[:1]})
    text = correction(LoopSummary("text", ""), "", kept_text, lang, uses_tools(body))
    return [*messages[:-1], {"role": "user", "content": text}]


def continuation_budget(record: Mapping[str, Any], max_tokens: int) -> int:
    """What the continuation had: the budget less the first attempt's tokens (``188?``)."""
    first = re.match(r"\d+", str(record["attempts"][0]))
    return max(16, max_tokens - (int(first.group()) if first else 0))


def request_body(messages: list[dict], budget: int, seed: int, overrides: list[str]) -> dict:
    config = load_config(None, parse_settings(overrides))
    body: dict[str, Any] = {
        "model": MODEL_ALIAS,
        "messages": messages,
        "max_tokens": budget,
        "seed": seed,
        "temperature": 0,  # the client's, as make e2e sends it
        **BASE_SAMPLING,
    }
    for key, value in (
        ("temperature", config.retryTemperature),
        ("frequency_penalty", config.retryFrequencyPenalty),
        ("presence_penalty", config.retryPresencePenalty),
    ):
        if value is not None:
            body[key] = value
    return body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("client_log", type=Path)
    parser.add_argument("--venv", type=Path, default=ROOT / "e2e" / ".venv")
    parser.add_argument("--max-tokens", type=int, default=700)
    parser.add_argument("--seeds", default=str(SEED), help="comma-separated sampling seeds")
    parser.add_argument("--set", dest="settings", action="append", default=[])
    parser.add_argument("--only", default="", help="comma-separated prompt ids")
    args = parser.parse_args(argv)
    only = {p for p in args.only.split(",") if p}
    records = [json.loads(line) for line in args.client_log.read_text("utf-8").splitlines()]
    resumed = [
        r for r in records if first_continuation(r) is not None and (not only or r["id"] in only)
    ]
    seeds = [int(s) for s in args.seeds.split(",") if s]

    stop_on_sigterm()
    install(args.venv)
    server = serve(args.venv, args.client_log.parent / "model-server.log")
    try:
        print(f"{len(resumed)} continuations from {args.client_log.name}, seeds {seeds}")
        for variant in VARIANTS:
            for seed in seeds:
                stops = tokens = 0
                for record in resumed:
                    messages = first_continuation(record)
                    if variant == "current":
                        messages = with_current_correction(messages)
                    budget = continuation_budget(record, args.max_tokens)
                    body = request_body(messages, budget, seed, args.settings)
                    reply = httpx.post(
                        f"{server.base_url}/chat/completions", json=body, timeout=900
                    )
                    reply.raise_for_status()
                    answer = reply.json()
                    stops += answer["choices"][0]["finish_reason"] == "stop"
                    tokens += answer["usage"]["completion_tokens"]
                print(
                    f"  correction {variant:8s} seed {seed:5d}: {stops}/{len(resumed)} end with "
                    f"stop, {tokens} tokens",
                    flush=True,
                )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
