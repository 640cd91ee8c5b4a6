"""Replay the continuations of a ``make e2e`` run against the model, with the correction as it
was sent and as the current code writes it.

A continuation's first words decide whether a small model finishes: this measures a change of
the correction text without the rest of the run moving. For every prompt of a client log
(``e2e/out/client-<stamp>.jsonl``) that was resumed, its first continuation request is sent
again, streamed nowhere and judged by nothing: once as the log has it, once rebuilt as the
engine builds a continuation now (``rescue.continuation.build_continuation``), at each seed
given.
Sampling is the retry settings' (``--set`` as for ``make e2e``) over the corpus's, with the
budget the continuation had (700 tokens minus the first attempt's). Prints per variant and
seed how many answers ended with ``stop`` (and of those, how many hold no run of copies and no
line said a third time: ``e2e.run.client_loop_chars``) and the tokens they took.
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
from e2e.run import client_loop_chars
from looprescue.commands.common import parse_settings
from looprescue.config import load_config
from looprescue.rescue.budget import MIN_RESUME_TOKENS
from looprescue.rescue.continuation import KeptWork, LoopSummary, build_continuation
from looprescue.rescue.conversation import conversation_language
from looprescue.wire.openai import OpenAIWire

VARIANTS = ("as sent", "current")


def first_continuation(record: Mapping[str, Any]) -> list[dict] | None:
    """The messages of a logged prompt's first continuation (None: it was not resumed)."""
    upstream = record.get("upstream") or []
    return upstream[1]["messages"] if len(upstream) > 1 else None


def with_current_correction(messages: list[dict]) -> list[dict]:
    """``messages`` as the engine now builds the continuation of what they continue: the
    logged assistant turn is the kept text, and everything before it the client's request."""
    if len(messages) >= 2 and messages[-2].get("role") == "assistant":
        original, kept = messages[:-2], KeptWork("", messages[-2].get("content") or "")
    else:
        original, kept = messages[:-1], KeptWork()
    request = {"messages": original}
    lang = conversation_language(request)
    body = build_continuation(OpenAIWire(), request, kept, LoopSummary("text", ""), lang)
    return body["messages"]


def continuation_budget(record: Mapping[str, Any], max_tokens: int) -> int:
    """What the continuation had: the budget less the first attempt's tokens (``188?``)."""
    first = re.match(r"\d+", str(record["attempts"][0]))
    return max(MIN_RESUME_TOKENS, max_tokens - (int(first.group()) if first else 0))


def request_body(messages: list[dict], budget: int, seed: int, overrides: list[str]) -> dict:
    """The continuation request as the proxy sends it: the client's sampling (temperature 0,
    the corpus's settings), the retry overrides on top, the budget left."""
    body = {"model": MODEL_ALIAS, "messages": messages, "max_tokens": budget, "seed": seed}
    body |= {"temperature": 0, **BASE_SAMPLING}
    wire = OpenAIWire()
    config = load_config(None, parse_settings(overrides))
    return wire.with_output_budget(wire.with_retry_overrides(body, config), budget)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("client_log", type=Path)
    parser.add_argument("--venv", type=Path, default=ROOT / "e2e" / ".venv")
    parser.add_argument("--max-tokens", type=int, default=700)
    parser.add_argument("--seeds", default=str(SEED), help="comma-separated sampling seeds")
    parser.add_argument("--set", dest="settings", action="append", default=[])
    parser.add_argument("--only", default="", help="comma-separated prompt ids")
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"comma-separated corrections to send: {', '.join(VARIANTS)}",
    )
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if unknown := set(variants) - set(VARIANTS):
        parser.error(f"--variants: unknown {', '.join(sorted(unknown))}")
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
        for variant in variants:
            for seed in seeds:
                stops = clean = tokens = 0
                for record in resumed:
                    messages = first_continuation(record)
                    if variant == "current":
                        messages = with_current_correction(messages)
                    budget = continuation_budget(record, args.max_tokens)
                    body = request_body(messages, budget, seed, args.settings)
                    server.forget_last_prompt()  # every request starts as the first would
                    reply = httpx.post(
                        f"{server.base_url}/chat/completions", json=body, timeout=900
                    )
                    reply.raise_for_status()
                    answer = reply.json()
                    stopped = answer["choices"][0]["finish_reason"] == "stop"
                    text = answer["choices"][0]["message"].get("content") or ""
                    stops += stopped
                    clean += stopped and client_loop_chars(text) == 0
                    tokens += answer["usage"]["completion_tokens"]
                print(
                    f"  correction {variant:8s} seed {seed:5d}: {stops}/{len(resumed)} end with "
                    f"stop ({clean} of them with no loop), {tokens} tokens",
                    flush=True,
                )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
