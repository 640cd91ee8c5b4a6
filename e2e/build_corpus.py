"""Join the raw generations with the hand labels into corpus/smollm2.jsonl, checking each label.

    python -m e2e.build_corpus

Every raw answer must have a label, and every label an answer. A periodic loop label carries
its ``period`` (for ``counter``: counted with digit runs collapsed) so that the onset can be
checked: at least ``min_copies`` (default 3) copies of
``text[onset:onset + period]`` from the onset (digit runs collapsed for ``counter``), and the
onset on a line start, a word start or offset 0 unless the label says ``unaligned: true`` (CJK
and other text without spaces). Near-copies that become exact later name that offset in
``exact_from``; the copies are checked from there.
"""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from e2e.onsets import collapse_digits
from e2e.prompts import ROOT, load_prompts

RAW = ROOT / "corpus" / "raw" / "smollm2-raw.jsonl"
LABELS = ROOT / "corpus" / "labels.yaml"
OUT = ROOT / "corpus" / "smollm2.jsonl"
KINDS = ("verbatim", "counter", "pool", "paragraph")


class LabelError(ValueError):
    pass


def corpus_id(raw_id: str) -> str:
    prompt_id, temperature = raw_id.split("@")
    return f"smollm2-{prompt_id}-{temperature}"


def source(raw: dict) -> str:
    p = raw["params"]
    return (
        f"{raw['model']} ({raw['package']}, sha256 {raw['model_sha256'][:12]}) served by "
        f"{raw['server']}, n_ctx {raw['n_ctx']}; temperature={p['temperature']:g} "
        f"seed={p['seed']} top_p={p['top_p']} top_k={p['top_k']} min_p={p['min_p']} "
        f"repeat_penalty={p['repeat_penalty']} max_tokens={p['max_tokens']}; "
        f"prompt {raw['prompt_id']} (corpus/prompts.yaml); finish_reason {raw['finish_reason']}, "
        f"{raw['usage']['completion_tokens']} tokens"
    )


def check(raw_id: str, text: str, label: dict) -> None:
    where = f"{LABELS.name}: {raw_id}"
    kind, onset = label.get("kind"), label.get("onset")
    if label["label"] != "loop":
        if kind is not None or onset is not None:
            raise LabelError(f"{where}: kind and onset are for loop labels only")
        return
    if kind not in KINDS:
        raise LabelError(f"{where}: kind {kind!r} is not one of {KINDS}")
    if not isinstance(onset, int) or not 0 <= onset < len(text):
        raise LabelError(f"{where}: onset must be an offset into the text")
    if not label.get("unaligned") and onset > 0:
        before, at = text[onset - 1], text[onset]
        if before != "\n" and not (before.isspace() and not at.isspace()):
            raise LabelError(f"{where}: onset {onset} is neither a line nor a word start")
    period = label.get("period")
    first_copy = label.get("first_copy")
    if first_copy is not None and (not isinstance(first_copy, int) or first_copy < 1):
        raise LabelError(f"{where}: first_copy must be a positive number of chars")
    if kind == "pool":
        return
    if not isinstance(period, int) or period < 1:
        raise LabelError(f"{where}: a {kind} loop needs its period")
    # near-copies first (an inner repeat that shrinks, a word that changes): the exact period
    # only starts later, at ``exact_from``
    exact_from = label.get("exact_from", onset)
    if not isinstance(exact_from, int) or not onset <= exact_from < len(text):
        raise LabelError(f"{where}: exact_from must be an offset at or after the onset")
    tail = text[exact_from:]
    if kind == "counter":
        # digit runs collapsed to one char each, so the period is counted on the collapsed text
        tail = collapse_digits(tail)[0]
    copies = label.get("min_copies", 3)
    need = int(copies * period)
    unit = tail[:period]
    if len(tail) < need or tail[:need] != (unit * (int(copies) + 1))[:need]:
        raise LabelError(
            f"{where}: text[{exact_from}:] does not start with {copies} copies of a "
            f"{period}-char unit {unit[:40]!r}"
        )


def counts_table(records: list[dict]) -> str:
    """The counts table of corpus/README.md: label by temperature, and loop kinds."""
    temps = sorted({r["id"].rsplit("-", 1)[1] for r in records})
    lines = [
        "| label | " + " | ".join(f"T={t[1:]}" for t in temps) + " | total |",
        "|---|" + "---:|" * (len(temps) + 1),
    ]
    for label in ("loop", "normal", "borderline"):
        cells = [
            sum(r["label"] == label and r["id"].endswith("-" + t) for r in records) for t in temps
        ]
        lines.append(f"| {label} | " + " | ".join(map(str, cells)) + f" | {sum(cells)} |")
    cells = [sum(r["id"].endswith("-" + t) for r in records) for t in temps]
    lines.append("| **total** | " + " | ".join(map(str, cells)) + f" | {sum(cells)} |")
    kinds: dict[str, int] = {}
    for r in records:
        if r["kind"]:
            kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    ordered = sorted(kinds.items(), key=lambda kv: -kv[1])
    lines.append("")
    lines.append("Loop kinds: " + ", ".join(f"{k} {n}" for k, n in ordered) + ".")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check, do not write")
    parser.add_argument(
        "--partial", action="store_true", help="leave out raw answers not labelled yet"
    )
    args = parser.parse_args(argv)
    prompts = load_prompts()
    order = {p.id: i for i, p in enumerate(prompts)}
    prompt_text = {p.id: p.prompt for p in prompts}
    raws = [json.loads(line) for line in RAW.open(encoding="utf-8")]
    labels = yaml.safe_load(LABELS.read_text(encoding="utf-8")) or {}
    missing = [r["id"] for r in raws if r["id"] not in labels]
    extra = sorted(set(labels) - {r["id"] for r in raws})
    errors = [] if args.partial else [f"{LABELS.name}: no label for {i}" for i in missing]
    errors += [f"{LABELS.name}: {i}: no such raw answer" for i in extra]
    records = []
    for raw in sorted(raws, key=lambda r: (order[r["prompt_id"]], r["params"]["temperature"])):
        label = labels.get(raw["id"])
        if label is None:
            continue
        try:
            check(raw["id"], raw["text"], label)
        except LabelError as err:
            errors.append(str(err))
            continue
        records.append(
            {
                "id": corpus_id(raw["id"]),
                "label": label["label"],
                "channel": "text",
                "lang": label.get("lang", raw["lang"]),
                "kind": label.get("kind"),
                "onset": label.get("onset"),
                "source": source(raw),
                "note": label["note"],
                # the request: where an asked range ends is the request's to say
                "prompt": prompt_text[raw["prompt_id"]],
                "text": raw["text"],
            }
            # what a cut may keep, where the label says it (near-copies of another length)
            | ({"first_copy": label["first_copy"]} if "first_copy" in label else {})
        )
    for error in errors:
        print(error, file=sys.stderr)
    if errors:
        return 1
    if not args.check:
        with OUT.open("w", encoding="utf-8") as out:
            for record in records:
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(counts_table(records))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
