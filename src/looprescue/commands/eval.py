"""``looprescue eval``: replay a labelled corpus through the streaming detector and score it."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer
from rich.console import Console
from rich.table import Table

from looprescue.commands.common import SET_HELP, parse_settings
from looprescue.config import ConfigError, load_config
from looprescue.corpus import (
    ALIGN_SLACK,
    SHORT_UNIT,
    CorpusError,
    Summary,
    evaluate,
    load_corpus,
)


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)


def eval_command(
    corpus: Path = typer.Argument(
        ..., metavar="CORPUS", help="Labelled corpus (JSON Lines).", show_default=False
    ),
    json_output: bool = typer.Option(
        False, "--json", help="One JSON object per record, then a summary."
    ),
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE", help="YAML config (detector.* keys)."
    ),
    seed: int = typer.Option(0, "--seed", metavar="N", help="Seed of the random 2-6 char deltas."),
    settings: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help=SET_HELP),
) -> None:
    """Score the detector on a labelled corpus.

    Every record is streamed through the detector in random 2-6 char deltas. The table
    gives recall on loops, false positives on normal texts, how late each loop is caught,
    any loop text a cut keeps beyond one copy of the repeated unit, and any a client of the
    proxy saw (the watermark asked after every delta).

    \b
    Example:
      looprescue eval corpus/dev.jsonl --seed 1

    Exit code 1 when a record is misjudged or a cut keeps, or a client saw, loop text
    beyond one copy (past the alignment slack), 2 when the corpus or the config cannot be
    read.
    """
    try:
        cfg = load_config(config, parse_settings(settings))
        records = load_corpus(corpus)
    except (ConfigError, CorpusError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    summary = evaluate(records, cfg.detector, seed=seed)
    if json_output:
        for verdict in summary.verdicts:
            typer.echo(orjson.dumps(verdict.to_dict()).decode())
        typer.echo(orjson.dumps({"summary": summary.to_dict()}).decode())
    else:
        _print_table(summary)
    raise typer.Exit(0 if summary.ok else 1)


def _print_table(summary: Summary) -> None:
    console = Console(width=max(Console().width, 140))
    table = Table(title="loop detector on corpus", show_lines=False)
    numeric = ("consumed", "prune", "onset", "delay", "beyond", "shown")
    for column in ("id", "label", "chan", "verdict", "rule", *numeric):
        table.add_column(column, justify="right" if column in numeric else "left")
    for v in summary.verdicts:
        if v.record.label == "borderline":
            verdict = "[yellow]fired[/yellow]" if v.fired else "[yellow]quiet[/yellow]"
        elif v.correct:
            verdict = "[green]ok[/green]"
        else:
            verdict = (
                "[red]MISSED[/red]" if v.record.label == "loop" else "[red]FALSE POSITIVE[/red]"
            )
        table.add_row(
            v.record.id,
            v.record.label,
            v.record.channel,
            verdict,
            v.rule or "-",
            _num(v.fired_at),
            _num(v.prune_offset),
            _num(v.record.onset),
            _num(v.delay),
            _beyond(v.kept_beyond_copy),
            _beyond(v.shown_beyond_copy),
        )
    console.print(table)
    data = summary.to_dict()
    delay = data["delay"]
    console.print(
        f"recall on loop: {summary.detected}/{summary.loops} ({summary.recall:.0%})   "
        f"false positives on normal: {len(summary.false_positives)}/{summary.normals}"
        + (f" ({', '.join(summary.false_positives)})" if summary.false_positives else "")
    )
    by = ", ".join(f"{k} {d}/{t}" for k, (d, t) in sorted(summary.recall_by.items()))
    console.print(f"recall by kind/channel: {by}")
    console.print(
        f"detection delay (chars after onset): median {delay['median']}, p90 {delay['p90']}, "
        f"max {delay['max']}"
    )
    short = data["short_exact_delay"]
    if short["n"]:
        console.print(
            f"delay on short exact repeats (verbatim, unit ≤ {SHORT_UNIT} chars, {short['n']} "
            f"records): median {short['median']}, p90 {short['p90']}, max {short['max']}"
        )
    kept = data["kept_beyond_copy"]
    console.print(
        f"loop text kept beyond one copy of the unit (pools: beyond the onset): total "
        f"{kept['total']} chars, max {kept['max']} (slack {kept['slack']} for aligning the cut)"
        + (f"; over the slack: {', '.join(kept['over_slack'])}" if kept["over_slack"] else "")
    )
    shown = data["shown_beyond_copy"]
    console.print(
        f"loop text a client saw beyond one copy (the watermark after every delta, or the "
        f"cut): total {shown['total']} chars, max {shown['max']}"
        + (f"; over the slack: {', '.join(shown['over_slack'])}" if shown["over_slack"] else "")
    )
    if data["onset_zero_delays"]:
        console.print(
            "lock-on delay where the sample starts inside the loop: "
            + ", ".join(f"{k} {d}" for k, d in data["onset_zero_delays"].items())
        )
    if data["early_fires"]:
        console.print("fired before the labelled onset: " + ", ".join(data["early_fires"]))
    if data["borderline"]:
        console.print(
            "borderline (not scored): "
            + ", ".join(
                f"{k} {'fired at ' + str(at) if at is not None else 'quiet'}"
                for k, at in data["borderline"].items()
            )
        )


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def _beyond(value: int | None) -> str:
    if value is None:
        return "-"
    return f"[red]{value}[/red]" if value > ALIGN_SLACK else str(value)
