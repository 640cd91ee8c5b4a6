"""``looprescue eval`` end to end: scoring the real corpus, exit codes, JSON, bad input."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from tests.paths import CORPUS, SMOLLM2

from looprescue.config import DetectorConfig
from looprescue.corpus import ALIGN_SLACK, MIN_LOOP_CHARS, Record, evaluate, load_corpus


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
    # and no client of the proxy saw more of a loop than its one copy
    assert summary.shown_over_slack() == []


@pytest.mark.parametrize("seed", [0, 1])
def test_every_loop_found_early_and_no_normal_flagged_on_the_smollm2_corpus(seed):
    summary = evaluate(load_corpus(SMOLLM2), DetectorConfig(), seed=seed)
    assert [v.record.id for v in summary.verdicts if not v.correct] == []
    short = summary.to_dict()["short_exact_delay"]
    assert short["median"] <= 300, short


def test_short_loop_excerpts_are_continued_as_the_readme_says():
    records = {r.id: r for r in load_corpus(CORPUS) + load_corpus(SMOLLM2)}
    short = records["smollm2-en-list-fruits-t0.8"]  # 484 chars from the onset to the end
    assert len(short.text) - short.onset < MIN_LOOP_CHARS
    text = short.scored_text()
    assert len(text) - short.onset >= MIN_LOOP_CHARS
    assert text.startswith(short.text)
    long_enough = records["smollm2-en-explain-tcp-t0"]
    assert long_enough.scored_text() == long_enough.text  # 6,297 chars from the onset
    normal = records["N03_poe-the-raven_refrain"]
    assert normal.scored_text() == normal.text


def test_cli_table_and_exit_code_zero():
    result = _run("eval", str(CORPUS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "recall on loop: 7/7" in result.stdout
    assert "false positives on normal: 0/10" in result.stdout


def test_cli_json_one_object_per_record_then_summary():
    result = _run("eval", str(CORPUS), "--json", "--seed", "7")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 19  # 18 records and the summary
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


def test_a_labelled_first_copy_is_what_a_cut_may_keep(tmp_path):
    # near-copies of a paragraph whose inner run shrinks: the unit the text shows is the run,
    # the label says the first copy is the paragraph's opening plus one copy of the run
    records = {r.id: r for r in load_corpus(SMOLLM2)}
    record = records["smollm2-zh-explain-photosynthesis-t0"]
    assert record.first_copy == 48 and record.allowed_copy() == 48
    plain = dataclasses.replace(record, first_copy=None)
    assert plain.allowed_copy() < 48  # the unit alone (the run) would count the opening as kept
    kept = [v.kept_beyond_copy for v in evaluate([record, plain], DetectorConfig()).verdicts]
    assert kept[0] == 0 and kept[1] > ALIGN_SLACK


def test_a_first_copy_past_the_text_or_without_an_onset_names_the_line(tmp_path):
    corpus = tmp_path / "c.jsonl"
    base = {"id": "a", "label": "loop", "channel": "text", "text": "ab" * 20, "onset": 2}
    for bad in ({"first_copy": 100}, {"first_copy": "4"}, {"first_copy": 4, "onset": None}):
        corpus.write_text("\n" + json.dumps({**base, **bad}) + "\n")
        result = _run("eval", str(corpus))
        assert result.returncode == 2, bad
        assert f"{corpus}:2: first_copy must be" in result.stderr


def test_near_copies_released_before_the_rule_fired_count_as_shown_not_kept(tmp_path):
    # the exact run starts after three near-copies of its sentence: the cut moves back over
    # them (nothing kept), but a proxy had released them before the rule could fire
    story = "Once there was a cat that liked to explore the big old house on the hill.\n\n"
    # (each variant said once: a sentence said again would be held back as the loop's)
    variants = [
        f"It walked into the next room, and then into the {c} room. "
        for c in ("red", "blue", "green")
    ]
    exact = "It walked into the next room. "
    text = story + "".join(v + exact for v in variants) + exact * 40
    record = Record("near", "loop", "text", text, len(story), "verbatim", 1)
    verdict = evaluate([record], DetectorConfig()).verdicts[0]
    assert verdict.prune_offset == len(story) and verdict.kept_beyond_copy == 0
    assert verdict.released > len(story)
    assert verdict.shown_beyond_copy == verdict.released - len(story) - verdict.allowed_copy
    assert verdict.shown_beyond_copy > ALIGN_SLACK
    corpus = tmp_path / "c.jsonl"
    fields = {"id": "near", "label": "loop", "channel": "text", "text": text}
    corpus.write_text(json.dumps({**fields, "onset": len(story), "kind": "verbatim"}) + "\n")
    result = _run("eval", str(corpus))
    assert result.returncode == 0, result.stdout  # judged right: it is a loop, and it fired
    assert "1 with loop text beyond one copy" in result.stderr
    result = _run("eval", str(corpus), "--strict")
    assert result.returncode == 1, result.stdout  # nothing kept, but the client saw it
    assert "loop text a client saw beyond one copy" in result.stdout
