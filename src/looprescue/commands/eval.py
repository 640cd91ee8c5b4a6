"""``looprescue eval``: replay a labelled corpus through the streaming detector and score it."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from looprescue.commands.common import (
    SET_HELP,
    emit,
    error_record,
    note,
    parse_settings,
    plural,
    summary,
)
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
    strict: bool = typer.Option(
        False,
        "--strict",
        help="Exit 1 also when loop text beyond one copy was kept by a cut or seen by a client.",
    ),
) -> None:
    """Score the detector on a labelled corpus.

    Every record is streamed through the detector in random 2-6 char deltas. The table
    gives recall on loops, false positives on normal texts, how late each loop is caught,
    any loop text a cut keeps beyond one copy of the repeated unit, and any a client of the
    proxy saw (the watermark asked after every delta).

    \b
    Example:
      looprescue eval corpus/dev.jsonl --seed 1
      looprescue eval corpus/smollm2.jsonl

    Exit code 1 when a record is misjudged (with --strict also when a cut keeps, or a
    client saw, loop text beyond one copy past the alignment slack), 0 otherwise, 2 when the
    corpus or the config cannot be read.
    """
    try:
        cfg = load_config(config, parse_settings(settings))
        records = load_corpus(corpus)
    except (ConfigError, CorpusError) as exc:
        note(f"error: {exc}")
        if json_output:
            emit(orjson.dumps(error_record(exc)).decode())
        raise typer.Exit(2) from None
    result = evaluate(records, cfg.detector, seed=seed)
    if json_output:
        for verdict in result.verdicts:
            emit(orjson.dumps(verdict.to_dict()).decode())
        emit(orjson.dumps({"summary": result.to_dict()}).decode())
    else:
        _print_table(result)
    wrong = sum(1 for v in result.verdicts if not v.correct and v.record.label != "borderline")
    beyond = set(result.over_slack()) | set(result.shown_over_slack())
    line = f"{plural(len(result.verdicts), 'record')}, {wrong} misjudged"
    if beyond:
        line += f", {len(beyond)} with loop text beyond one copy"
        line += "" if strict else " (not failing: --strict fails on them)"
    summary(line)
    raise typer.Exit(1 if wrong or (strict and beyond) else 0)


NUMERIC = ("consumed", "prune", "onset", "delay", "beyond", "shown")
LEGEND = {
    "label": "what the corpus says the record is: loop, normal or borderline (not scored)",
    "chan": "the channel it streams in: reasoning or text",
    "verdict": "ok, MISSED (a loop not caught), FALSE POSITIVE (FALSE+: a normal text cut); "
    "for borderline records whether the detector fired",
    "rule": "the rule that fired",
    "consumed": "chars streamed when it fired",
    "prune": "where the cut goes",
    "onset": "where the labelled loop begins",
    "delay": "chars streamed past the onset when it fired",
    "beyond": "loop chars the cut keeps past one copy of the repeated unit",
    "shown": "loop chars a proxy's client saw past one copy (red: over the slack of {slack})",
}


# Below this width the table leaves out the columns the others imply (label, chan, consumed,
# prune, onset) and draws no borders, so that it fits 80 columns with whole ids.
WIDE_TABLE = 130
ALL_COLUMNS = ("id", "label", "chan", "verdict", "rule", *NUMERIC)
NARROW_COLUMNS = ("id", "verdict", "rule", "delay", "beyond", "shown")


def _print_table(summary: Summary) -> None:
    console = Console(highlight=False)
    wide = console.width >= WIDE_TABLE
    columns = ALL_COLUMNS if wide else NARROW_COLUMNS
    table = Table(
        title="loop detector on corpus",
        show_lines=False,
        box=box.HEAVY_HEAD if wide else box.SIMPLE_HEAD,
        collapse_padding=not wide,
        pad_edge=wide,
    )
    for column in columns:
        table.add_column(
            column,
            justify="right" if column in NUMERIC else "left",
            # an id is never cut: it is what finds the record in the corpus
            no_wrap=column == "id",
        )
    for v in summary.verdicts:
        if v.record.label == "borderline":
            verdict = "[yellow]fired[/yellow]" if v.fired else "[yellow]quiet[/yellow]"
        elif v.correct:
            verdict = "[green]ok[/green]"
        elif v.record.label == "loop":
            verdict = "[red]MISSED[/red]"
        else:
            verdict = "[red]FALSE POSITIVE[/red]" if wide else "[red]FALSE+[/red]"
        cells = {
            "id": escape(v.record.id),
            "label": v.record.label,
            "chan": v.record.channel,
            "verdict": verdict,
            "rule": v.rule or "-",
            "consumed": _num(v.fired_at),
            "prune": _num(v.prune_offset),
            "onset": _num(v.record.onset),
            "delay": _num(v.delay),
            "beyond": _beyond(v.kept_beyond_copy),
            "shown": _beyond(v.shown_beyond_copy),
        }
        table.add_row(*(cells[column] for column in columns))
    console.print(table)
    for column in columns[1:]:
        console.print(f"  {column}: {LEGEND[column].format(slack=ALIGN_SLACK)}", style="dim")
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
