"""``make e2e``: the looping prompts of the SmolLM2 corpus, sent to the real model directly and
through ``looprescue proxy``, with the real ``openai`` client, streaming, as a user would.

    python -m e2e.run [--set KEY=VALUE ...] [--only ID,ID] [--max-tokens 700]

A prompt is a looping prompt when its temperature-0 answer in corpus/smollm2.jsonl is labelled
``loop`` and its labelled loop has begun within the token budget. Per prompt it prints whether
and when the proxy detected the loop, what it pruned, how many chars of the direct run's
labelled loop reached the client anyway, whether it resumed and completed, and the tokens used
through the proxy against the same prompt sent directly. Exit status 1 when any looping prompt
does not come back complete (finish ``stop``), free of loop text and cheaper than directly.

Columns: ``detected`` yes +N (chars consumed past the labelled onset when the proxy fired);
``pruned`` chars cut; ``loop/leak`` chars of the direct run's labelled loop the client got, and
of those the chars past the first copy of its unit (the one copy the proxy keeps); ``c-loop``
chars of a run of three or more copies in the client's text, or of its lines said a third time
or more (markers taken out: a continuation that loops again or restarts the answer); ``echo``
chars the model copied from the proxy's correction; ``res`` resumes; ``finish``; ``done``
(finish stop, no rescue cap, no failed resume); ``tok p/d`` tokens through the proxy (all
upstream requests) and directly; then per upstream request its tokens and finish (s stop,
l length, ? closed by the proxy's cut).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import openai
import yaml

from e2e.model import (
    MODEL_ALIAS,
    Server,
    die_with_parent,
    free_port,
    install,
    serve,
    stop_on_sigterm,
)
from e2e.onsets import counter_runs, maximal_runs
from e2e.prompts import BASE_SAMPLING, ROOT, SEED, load_prompts
from e2e.tap import Exchange, Tap

CORPUS = ROOT / "corpus" / "smollm2.jsonl"
LABELS = ROOT / "corpus" / "labels.yaml"
LOOPRESCUE = Path(sys.executable).with_name("looprescue")
# A run of at least this many chars of three or more copies in the client's text (the proxy's
# markers taken out) is loop text however it got there: a continuation that loops again or
# restarts the answer, or a loop the proxy let through.
CLIENT_LOOP_CHARS = 100
# A line said a third time or more counts as loop text when it is at least this long, its list
# marker (``12.``, ``-``, ``*``) aside: short lines (``}``, ``| --- |``, ``Yes.``) recur in
# healthy answers.
RESTATED_LINE_MIN = 20
LIST_MARKER = re.compile(r"^(?:\d+[.)、．]|[-*+•])\s*")
# The proxy's markers and notes: 〔…〕 on a line of their own.
NOTE = re.compile(r"\n?〔[^〕]*〕\n?")
# Sentences of the proxy's correction at least this long found in the client's text: the
# model echoed the correction instead of continuing the task.
ECHO_MIN_CHARS = 24


@dataclass
class Looping:
    """A prompt whose direct answer loops, with the labelled loop of that answer."""

    id: str
    prompt: str
    onset: int
    period: int | None
    corpus_text: str
    # chars from the onset the client may get: the first copy of the unit (its period), or the
    # label's ``first_copy`` when copies are near-copies of another length
    keep: int


@dataclass
class Direct:
    text: str
    finish: str | None
    tokens: int
    matches_corpus: bool


@dataclass
class Result:
    id: str
    detected: bool
    delay: int | None  # chars consumed after the labelled onset when the proxy fired
    rules: list[str]
    pruned: int
    loop_to_client: int  # chars of the direct run's labelled loop the client received
    leaked: int  # of those, chars past the one copy the proxy keeps by design
    client_loop: int  # chars of a periodic run (>= 3 copies) or of lines said a third time
    echo: int  # chars of the client's text copied from the proxy's correction messages
    resumes: int
    finish: str | None
    completed: bool
    tokens_proxy: int
    tokens_direct: int
    attempts: list[str]  # per upstream request: tokens and finish (s stop, l length)
    marker_text: str = ""
    notes: list[str] = field(default_factory=list)
    # chars/s the model wrote the first answer at: with a hold bound, the slower the model,
    # the more of a loop's text passes the bound before the loop is confirmed
    pace: float | None = None

    @property
    def ok(self) -> bool:
        return (
            self.completed
            and self.leaked == 0
            and self.client_loop == 0
            and self.echo == 0
            and self.tokens_proxy < self.tokens_direct
        )


def looping_prompts(only: set[str]) -> list[Looping]:
    prompts = {p.id: p for p in load_prompts()}
    labels = yaml.safe_load(LABELS.read_text(encoding="utf-8"))
    found = []
    for line in CORPUS.open(encoding="utf-8"):
        record = json.loads(line)
        if record["label"] != "loop" or not record["id"].endswith("-t0"):
            continue
        prompt_id = record["id"].removeprefix("smollm2-").removesuffix("-t0")
        if only and prompt_id not in only:
            continue
        label = labels[f"{prompt_id}@t0"]
        found.append(
            Looping(
                prompt_id,
                prompts[prompt_id].prompt,
                record["onset"],
                label.get("period"),
                record["text"],
                label.get("first_copy", label.get("period") or 0),
            )
        )
    return found


def sampling_kwargs(max_tokens: int) -> dict:
    extra = {k: v for k, v in BASE_SAMPLING.items() if k != "top_p"}
    return {
        "temperature": 0,
        "top_p": BASE_SAMPLING["top_p"],
        "seed": SEED,
        "max_tokens": max_tokens,
        "extra_body": extra,
    }


def stream(client: openai.OpenAI, prompt: str, max_tokens: int, session: str) -> tuple[str, str]:
    parts: list[str] = []
    finish = None
    response = client.chat.completions.create(
        model=MODEL_ALIAS,
        messages=[{"role": "user", "content": prompt}],
        stream=True,
        extra_headers={"x-looprescue-session": session},
        **sampling_kwargs(max_tokens),
    )
    for chunk in response:
        for choice in chunk.choices:
            if choice.delta and choice.delta.content:
                parts.append(choice.delta.content)
            if choice.finish_reason:
                finish = choice.finish_reason
    return "".join(parts), finish


def common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def restated_line_chars(text: str, onset: int = 0) -> int:
    """Chars of lines past ``onset`` that say again, for the third time or more, a line of
    ``text`` (its list marker aside, at least RESTATED_LINE_MIN chars): a list that keeps
    re-emitting one item between others (``1. …`` / ``2. X`` / ``1. …`` / ``2. X``) is no run
    of copies, but it is loop text on the client's screen. The second time a line is said is
    not counted (restating a point once is no loop). The total counts when it reaches
    CLIENT_LOOP_CHARS; else 0."""
    seen: dict[str, int] = {}
    restated = at = 0
    for line in text.splitlines(keepends=True):
        start, at = at, at + len(line)
        content = LIST_MARKER.sub("", line.strip())
        if len(content) < RESTATED_LINE_MIN:
            continue
        seen[content] = times = seen.get(content, 0) + 1
        if times >= 3 and at > onset:
            restated += at - max(start, onset)
    return restated if restated >= CLIENT_LOOP_CHARS else 0


def client_loop_chars(text: str, onset: int = 0) -> int:
    """Loop text in the client's answer past ``onset``: the longest run of copies, or the lines
    said a third time or more, whichever covers more."""
    return max(periodic_run_chars(text, onset), restated_line_chars(text, onset))


def periodic_run_chars(text: str, onset: int = 0) -> int:
    """Chars covered by the longest run of three or more copies in ``text`` (verbatim, or
    with digit runs collapsed) that goes past the labelled ``onset``, when it reaches
    CLIENT_LOOP_CHARS; else 0. A run that ends before the onset is what the label calls
    healthy (the items a template prompt asked for)."""
    runs = maximal_runs(text, max_period=600) + counter_runs(text, max_period=600)
    longest = max((run.end - run.onset for run in runs if run.end > onset), default=0)
    return longest if longest >= CLIENT_LOOP_CHARS else 0


def correction(body: dict) -> str:
    """The proxy's correction: the last user message of a continuation request."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def echoed_chars(answer: str, corrections: list[str]) -> int:
    """Chars of ``answer`` that repeat sentences of the corrections (each occurrence)."""
    # a Chinese sentence ends at its mark, with no space after it; the proxy's tag is not text
    # the model would copy
    parts = (
        part.strip().removeprefix("[looprescue]").strip()
        for text in corrections
        for part in re.split(r"(?<=[.!?:])\s+|(?<=[。！？：])|\n+", text)
    )
    sentences = {part for part in parts if len(part) >= ECHO_MIN_CHARS}
    return sum(answer.count(sentence) * len(sentence) for sentence in sentences)


class Proxy:
    """``looprescue proxy`` as a user runs it, in front of the relay."""

    def __init__(self, upstream_port: int, audit: Path, settings: list[str], log: Path) -> None:
        self.port = free_port()
        self.audit = audit
        command = [
            str(LOOPRESCUE),
            "proxy",
            "--upstream",
            f"http://127.0.0.1:{upstream_port}",
            "--port",
            str(self.port),
            "--audit-log",
            str(audit),
        ]
        for setting in settings:
            command += ["--set", setting]
        self.process = subprocess.Popen(
            command, stdout=log.open("ab"), stderr=subprocess.STDOUT, preexec_fn=die_with_parent
        )
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise SystemExit(
                    f"looprescue proxy exited with {self.process.returncode}; see {log}"
                )
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/v1/models", timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"looprescue proxy did not start; see {log}") from None
                time.sleep(0.2)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def audit_records(self) -> list[dict]:
        if not self.audit.exists():
            return []
        return [json.loads(line) for line in self.audit.open(encoding="utf-8") if line.strip()]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def judge(
    item: Looping,
    direct: Direct,
    text: str,
    finish: str | None,
    audit: list[dict],
    exchanges: list[Exchange],
) -> Result:
    detections = [r for r in audit if r.get("kind") == "detection"]
    cuts = [r for r in audit if r.get("kind") == "cut"]
    # the first detection is in the answer to the user's request; later ones in continuations
    first = detections[0] if detections else None
    notes = []
    delay = None
    if first is not None and first.get("fired_at") is not None:
        delay = max(0, first["fired_at"] - item.onset)
        if first["fired_at"] < item.onset:
            notes.append(f"fired {item.onset - first['fired_at']} chars before the onset")
    if not direct.matches_corpus:
        notes.append("direct run differs from the corpus text")
    # Chars of the labelled loop on the client: how far the client's text agrees with the
    # direct run past the onset (the direct run at temperature 0 is the corpus text's prefix).
    agree = common_prefix(text, direct.text)
    loop_to_client = max(0, agree - item.onset)
    leaked = max(0, agree - (item.onset + item.keep))
    answer = NOTE.sub("\n", text)
    client_loop = client_loop_chars(answer, item.onset)
    echo = echoed_chars(answer, [correction(e.body) for e in exchanges[1:]])
    failed = any(r.get("kind") == "resume_failed" for r in audit)
    capped = any(r.get("action") == "cap" for r in cuts)
    if capped:
        notes.append("rescue cap reached")
    if failed:
        notes.append("resume failed")
    marker_at = text.find("〔")
    return Result(
        id=item.id,
        detected=bool(detections),
        delay=delay,
        rules=[str(d.get("rule")) for d in detections],
        pruned=sum(d.get("chars_pruned", 0) for d in detections),
        loop_to_client=loop_to_client,
        leaked=leaked,
        client_loop=client_loop,
        echo=echo,
        resumes=sum(r.get("kind") == "resume" for r in audit),
        finish=finish,
        completed=finish == "stop" and not capped and not failed,
        tokens_proxy=sum(e.tokens for e in exchanges),
        tokens_direct=direct.tokens,
        attempts=[f"{e.tokens}{(e.finish_reason or '?')[0]}" for e in exchanges],
        marker_text=text[marker_at : text.find("\n", marker_at)] if marker_at >= 0 else "",
        notes=notes,
        pace=exchanges[0].chars_per_s if exchanges else None,
    )


def row(r: Result) -> str:
    detected = f"yes +{r.delay}" if r.detected and r.delay is not None else str(r.detected).lower()
    return (
        f"{r.id:28} {detected:>10} {r.pruned:>7} {r.loop_to_client:>6}/{r.leaked:<5} "
        f"{r.client_loop:>6} {r.echo:>5} {r.resumes:>3} {r.finish or '-':>7} "
        f"{'yes' if r.completed else 'no':>4} "
        f"{r.tokens_proxy:>5}/{r.tokens_direct:<5} {'ok' if r.ok else 'FAIL':>4}  "
        + "; ".join([",".join(r.attempts), *r.notes])
    )


HEADER = (
    f"{'prompt':28} {'detected':>10} {'pruned':>7} {'loop/leak':>12} {'c-loop':>6} {'echo':>5} "
    f"{'res':>3} "
    f"{'finish':>7} {'done':>4} {'tok p/d':>11} {'':>4}"
)


def run_direct(
    client: openai.OpenAI, server: Server, tap: Tap, item: Looping, max_tokens: int
) -> Direct:
    server.forget_last_prompt()  # (a direct answer and its proxied run start alike)
    mark = tap.mark()
    text, finish = stream(client, item.prompt, max_tokens, uuid.uuid4().hex)
    tokens = sum(e.tokens for e in tap.since(mark))
    shorter = min(len(text), len(item.corpus_text))
    return Direct(text, finish, tokens, text[:shorter] == item.corpus_text[:shorter])


def run_proxied(
    client: openai.OpenAI,
    server: Server,
    tap: Tap,
    proxy: Proxy,
    item: Looping,
    direct: Direct,
    max_tokens: int,
) -> tuple[Result, str, list[Exchange], list[dict]]:
    server.forget_last_prompt()
    mark = tap.mark()
    seen = len(proxy.audit_records())
    text, finish = stream(client, item.prompt, max_tokens, uuid.uuid4().hex)
    time.sleep(0.2)  # the audit line of the last event is written as the response ends
    exchanges = tap.since(mark)
    audit = proxy.audit_records()[seen:]
    result = judge(item, direct, text, finish, audit, exchanges)
    return result, text, exchanges, audit


class DirectCache:
    """Direct answers at temperature 0 are deterministic (the corpus text checks it: the direct
    answer must be its prefix), so a direct answer is generated once per model, prompt and
    sampling settings and reused by later runs (``--fresh-direct`` generates it again)."""

    def __init__(self, path: Path, model_sha256: str) -> None:
        self.path = path
        self.model = model_sha256
        self.entries: dict[str, dict] = {}
        if path.exists():
            for line in path.open(encoding="utf-8"):
                entry = json.loads(line)
                self.entries[entry["key"]] = entry

    def key(self, item: Looping, max_tokens: int) -> str:
        # tokens as the model server's tokenizer counts them (see e2e.tap)
        return json.dumps([self.model, item.prompt, max_tokens, BASE_SAMPLING, SEED, "tokenizer"])

    def get(self, item: Looping, max_tokens: int) -> Direct | None:
        entry = self.entries.get(self.key(item, max_tokens))
        if entry is None or (entry["direct"]["text"] and not entry["direct"]["tokens"]):
            return None  # never stored, or stored without its token count
        return Direct(**entry["direct"])

    def put(self, item: Looping, max_tokens: int, direct: Direct) -> None:
        entry = {"key": self.key(item, max_tokens), "direct": asdict(direct)}
        self.entries[entry["key"]] = entry
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=ROOT / "e2e" / ".venv")
    parser.add_argument("--out", type=Path, default=ROOT / "e2e" / "out")
    parser.add_argument("--max-tokens", type=int, default=700)
    parser.add_argument("--set", dest="settings", action="append", default=[])
    parser.add_argument("--only", default="", help="comma-separated prompt ids")
    parser.add_argument(
        "--fresh-direct",
        action="store_true",
        help="send every prompt directly again instead of reusing a cached direct answer",
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    only = {p for p in args.only.split(",") if p}

    stop_on_sigterm()
    install(args.venv)
    server = serve(args.venv, args.out / "model-server.log")
    tap = Tap(server.base_url.removesuffix("/v1")).start()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    audit = args.out / f"audit-{stamp}.jsonl"
    proxy = Proxy(tap.port, audit, args.settings, args.out / "proxy.log")
    direct_client = openai.OpenAI(base_url=tap.base_url, api_key="e2e", max_retries=0, timeout=600)
    proxy_client = openai.OpenAI(base_url=proxy.base_url, api_key="e2e", max_retries=0, timeout=900)
    print(
        f"model: {server.gguf.name} via llama-cpp-python {server.version}, 127.0.0.1:{server.port}"
    )
    overrides = " ".join(f"--set {s}" for s in args.settings)
    print(f"proxy: looprescue proxy --audit-log {audit} {overrides}")
    print(f"budget: {args.max_tokens} tokens, temperature 0, seed {SEED}, {BASE_SAMPLING}")
    results: list[Result] = []
    cached = same_start = 0
    cache = DirectCache(args.out / "direct-cache.jsonl", server.describe()["model_sha256"])
    try:
        print(HEADER)
        for item in looping_prompts(only):
            direct = None if args.fresh_direct else cache.get(item, args.max_tokens)
            if direct is None:
                direct = run_direct(direct_client, server, tap, item, args.max_tokens)
                cache.put(item, args.max_tokens, direct)
            else:
                cached += 1
            if len(direct.text) < item.onset + 3 * (item.period or 100):
                print(f"{item.id:28} skipped: the direct run ends before its labelled loop")
                continue
            result, text, upstream, audit_records = run_proxied(
                proxy_client, server, tap, proxy, item, direct, args.max_tokens
            )
            results.append(result)
            # the loop is measured on the direct answer: the proxied stream must be that answer
            first = "".join(upstream[0].text) if upstream else ""
            same_start += direct.text.startswith(first)
            print(row(result), flush=True)
            with (args.out / f"client-{stamp}.jsonl").open("a", encoding="utf-8") as handle:
                record = {
                    "id": item.id,
                    "direct": direct.text,
                    "client": text,
                    # what the proxy asked the model and what each request streamed back
                    "upstream": [
                        {"messages": e.body.get("messages"), "text": "".join(e.text)}
                        for e in upstream
                    ],
                    "audit": audit_records,
                    **asdict(result),
                }
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    finally:
        proxy.stop()
        tap.stop()
        server.stop()
    if cached:
        print(
            f"direct answers: {cached} reused from {cache.path.name} (--fresh-direct: send again)"
        )
    passed = sum(r.ok for r in results)
    tokens_proxy = sum(r.tokens_proxy for r in results)
    tokens_direct = sum(r.tokens_direct for r in results)
    print(
        f"summary: {passed}/{len(results)} looping prompts ok; detected "
        f"{sum(r.detected for r in results)}, completed {sum(r.completed for r in results)}, "
        f"resumed {sum(r.resumes > 0 for r in results)}, leaked loop chars "
        f"{sum(r.leaked for r in results)}, client loops "
        f"{sum(r.client_loop > 0 for r in results)}, echoed corrections "
        f"{sum(r.echo > 0 for r in results)}; "
        f"tokens {tokens_proxy} through the proxy vs {tokens_direct} direct"
    )
    print(f"first attempts that stream the direct answer: {same_start}/{len(results)}")
    paces = sorted(r.pace for r in results if r.pace is not None)
    if paces:
        print(
            f"model pace (first answers): median {statistics.median(paces):.0f} chars/s, "
            f"{paces[0]:.0f} to {paces[-1]:.0f}"
        )
    return 0 if results and passed == len(results) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
