"""Generate the raw answers of the SmolLM2 corpus: every prompt at each temperature.

    python -m e2e.generate --venv e2e/.venv --out corpus/raw/smollm2-raw.jsonl

Appends one JSON line per (prompt, temperature) and skips pairs already in the file, so an
interrupted run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import httpx

from e2e.model import MODEL_ALIAS, install, serve, stop_on_sigterm
from e2e.prompts import load_prompts, sampling


def raw_id(prompt_id: str, temperature: float) -> str:
    return f"{prompt_id}@t{temperature:g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--temperatures", default="0,0.8")
    parser.add_argument("--max-tokens", type=int, default=1500)
    parser.add_argument("--only", default="", help="comma-separated prompt ids")
    args = parser.parse_args(argv)

    done = set()
    if args.out.exists():
        done = {json.loads(line)["id"] for line in args.out.open(encoding="utf-8")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    prompts = load_prompts()
    if args.only:
        wanted = set(args.only.split(","))
        prompts = [p for p in prompts if p.id in wanted]
    stop_on_sigterm()
    install(args.venv)
    server = serve(args.venv, args.out.with_suffix(".server.log"))
    try:
        described = server.describe()
        with httpx.Client(timeout=600) as client, args.out.open("a", encoding="utf-8") as out:
            for temperature in (float(t) for t in args.temperatures.split(",")):
                for prompt in prompts:
                    rid = raw_id(prompt.id, temperature)
                    if rid in done:
                        continue
                    params = sampling(temperature, args.max_tokens)
                    body = {
                        "model": MODEL_ALIAS,
                        "messages": [{"role": "user", "content": prompt.prompt}],
                        **params,
                    }
                    reply = client.post(f"{server.base_url}/chat/completions", json=body)
                    reply.raise_for_status()
                    data = reply.json()
                    choice = data["choices"][0]
                    record = {
                        "id": rid,
                        "prompt_id": prompt.id,
                        "lang": prompt.lang,
                        "params": params,
                        **described,
                        "finish_reason": choice["finish_reason"],
                        "usage": data["usage"],
                        "text": choice["message"]["content"],
                    }
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
                    out.flush()
                    print(rid, choice["finish_reason"], data["usage"]["completion_tokens"])
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
