"""``looprescue eval`` end to end: scoring the real corpus, exit codes, JSON, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.paths import CORPUS

from looprescue.config import DetectorConfig
from looprescue.corpus import MIN_LOOP_CHARS, evaluate, load_corpus


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "looprescue.cli", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_every_loop_detected_and_no_normal_flagged_on_the_dev_corpus(seed):
    summary = evaluate(load_corpus(CORPUS), DetectorConfig(), seed=seed)
    misjudged = [v.record.id for v in summary.verdicts if not v.correct]
    assert misjudged == []
    assert summary.recall == 1.0 and summary.false_positives == []
    # early fires would mean coherent text was cut
    assert summary.to_dict()["early_fires"] == []


def test_short_loop_excerpts_are_continued_as_the_readme_says():
    records = {r.id: r for r in load_corpus(CORPUS)}
    short = records["L07_gemini-cli-15593_generating-go-done"]
    text = short.scored_text()
    assert len(text) - short.onset >= MIN_LOOP_CHARS
    assert text.startswith(short.text)
    long_enough = records["L05_gemini-cli-4807_completion-summary-cycle"]
    assert long_enough.scored_text() == long_enough.text  # 1,214 chars: not continued
    normal = records["N03_poe-the-raven_refrain"]
    assert normal.scored_text() == normal.text


def test_cli_table_and_exit_code_zero():
    result = _run("eval", str(CORPUS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "recall on loop: 18/18" in result.stdout
    assert "false positives on normal: 0/14" in result.stdout


def test_cli_json_one_object_per_record_then_summary():
    result = _run("eval", str(CORPUS), "--json", "--seed", "7")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 35
    assert lines[-1]["summary"]["ok"] is True
    first = lines[0]
    assert {"id", "label", "fired", "rule", "consumed", "prune_offset", "delay"} <= first.keys()


def test_cli_exit_one_when_a_record_is_misjudged(tmp_path):
    # a looping text labelled normal must be reported as a false positive
    corpus = tmp_path / "c.jsonl"
    text = "Intro. " + "Now. OK. Emit. Producing. " * 60
    corpus.write_text(
        json.dumps({"id": "x", "label": "normal", "channel": "reasoning", "text": text}) + "\n"
    )
    result = _run("eval", str(corpus))
    assert result.returncode == 1
    assert "FALSE POSITIVE" in result.stdout


def test_cli_exit_two_names_the_line_of_a_bad_record(tmp_path):
    corpus = tmp_path / "c.jsonl"
    good = json.dumps({"id": "a", "label": "normal", "channel": "text", "text": "hello"})
    corpus.write_text(good + "\n{not json\n")
    result = _run("eval", str(corpus))
    assert result.returncode == 2
    assert f"{corpus}:2: invalid JSON" in result.stderr
    corpus.write_text(json.dumps({"id": "a", "label": "maybe", "channel": "text", "text": "x"}))
    result = _run("eval", str(corpus))
    assert result.returncode == 2 and "label 'maybe'" in result.stderr
