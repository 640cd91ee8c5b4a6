"""Fuzzing the offline commands with corrupted copies of the real DSH sessions.

Every example takes one of the recorded fixture logs, damages it (bit flips, truncation, a torn
frame, garbage, a field of the wrong type, an unknown event type, a huge line; zstd or plain)
and runs the real command line on a copy: scan, doctor, sessions, clean (dry run and real) and
repair (dry run and real). The property, for every command:

* exit code 0, 1 or 2 (never 3, a bug; never a traceback);
* exit code 2 comes with an ``error:`` line naming the file;
* nothing is written when the command fails or only reads, and what a successful clean or
  repair writes reads back cleanly.

The examples are drawn the same way on every run (``derandomize``) so ``make test`` is
repeatable; ``LOOPRESCUE_FUZZ_EXAMPLES=2000`` runs a longer, differently seeded search.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.paths import SESSIONS
from tests.test_dsh_helpers import tree_state
from typer.testing import CliRunner

from looprescue.cli import app
from looprescue.dsh import open_log
from looprescue.dsh.closers import OpenTurnTracker
from looprescue.dsh.decoder import compress_frame
from looprescue.dsh.frames import iter_frames

runner = CliRunner()
FIXTURES = sorted(SESSIONS.glob("*/session*/session.v4.jsonl.zstd"))
LONG_RUN = int(os.environ.get("LOOPRESCUE_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=LONG_RUN or 150,
    derandomize=not LONG_RUN,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
OTHER_TYPES = [None, True, 0, -1, 1.5, "", "x", [], [0], ["x"], {}, {"a": 1}]
READ_ONLY = ("scan", "doctor", "sessions", "clean --dry-run", "repair --dry-run")


@cache
def frames_of(fixture: Path) -> tuple[tuple[bytes, tuple[bytes, ...]], ...]:
    """(compressed bytes, lines) of each frame of a fixture."""
    data = fixture.read_bytes()
    return tuple(
        (data[f.offset : f.offset + f.size], tuple(f.content.splitlines(keepends=True)))
        for f in iter_frames(fixture)
    )


def json_paths(value, prefix=()):
    """Every place inside a JSON value (dict keys, list indexes)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from json_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*prefix, index)
            yield from json_paths(item, (*prefix, index))


def replace_at(value, path, new):
    target = value
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = new


@st.composite
def corrupted_logs(draw):
    """(fixture name, file name, bytes) of a damaged copy of a fixture log."""
    fixture = draw(st.sampled_from(FIXTURES))
    frames = frames_of(fixture)
    kind = draw(
        st.sampled_from(
            ["bit flips", "truncation", "torn frame", "garbage", "wrong type", "unknown type",
             "huge line", "dropped line", "swapped lines"]
        )
    )  # fmt: skip
    raw = b"".join(f for f, _ in frames)
    if kind in ("bit flips", "truncation", "torn frame", "garbage"):
        data = bytearray(raw)
        if kind == "bit flips":
            for _ in range(draw(st.integers(1, 4))):
                position = draw(st.integers(0, len(data) - 1))
                data[position] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncation":
            del data[draw(st.integers(0, len(data) - 1)) :]
        elif kind == "torn frame":
            index = draw(st.integers(1, len(frames) - 1))
            start = sum(len(f) for f, _ in frames[:index])
            del data[start + draw(st.integers(1, len(frames[index][0]) - 1)) :]
        else:
            at = draw(st.integers(0, len(data)))
            data[at:at] = draw(st.binary(min_size=1, max_size=64))
        return fixture.parent.parent.name, fixture.name, bytes(data)
    # line-level damage, written as zstd frames (DSH's batching kept) or as plain JSONL
    batches = [list(lines) for _, lines in frames]
    flat = [(b, i) for b, lines in enumerate(batches) for i in range(len(lines))][1:]
    b, i = draw(st.sampled_from(flat))
    event = json.loads(batches[b][i])
    if kind == "wrong type":
        paths = list(json_paths(event))
        path = draw(st.sampled_from(paths))
        replace_at(event, path, draw(st.sampled_from(OTHER_TYPES)))
    elif kind == "unknown type":
        event["type"] = draw(st.sampled_from(["x/y", "session", "", "assistant/messages"]))
        if draw(st.booleans()):
            event["ignorable"] = True
    elif kind == "huge line":
        event["data"] = {"blob": "z" * draw(st.sampled_from([1 << 20, 10 << 20]))}
        event["type"], event["ignorable"] = "fuzz/huge", True
    if kind == "dropped line":
        del batches[b][i]
    elif kind == "swapped lines" and i + 1 < len(batches[b]):
        batches[b][i], batches[b][i + 1] = batches[b][i + 1], batches[b][i]
    elif kind not in ("dropped line", "swapped lines"):
        batches[b][i] = json.dumps(event, ensure_ascii=False).encode() + b"\n"
    if draw(st.booleans()):
        plain = b"".join(b"".join(lines) for lines in batches)
        return fixture.parent.parent.name, "session.v4.jsonl", plain
    data = b"".join(compress_frame(b"".join(lines)) for lines in batches if lines)
    return fixture.parent.parent.name, fixture.name, data


def install(root: Path, name: str, data: bytes) -> tuple[Path, Path]:
    sessions = root / "sessions"
    session_dir = sessions / "--home-ana-proj--" / "session-fuzz"
    session_dir.mkdir(parents=True)
    log = session_dir / name
    log.write_bytes(data)
    log.chmod(0o600)
    (session_dir / "session.lock").touch()
    return sessions, log


def run(command: str, log: Path, sessions: Path):
    args = {
        "scan": ["scan", log],
        "doctor": ["doctor", log],
        "sessions": ["sessions", "--data", sessions],
        "clean --dry-run": ["clean", log, "--data", sessions, "--dry-run"],
        "clean --yes": ["clean", log, "--data", sessions, "--yes"],
        "repair --dry-run": ["repair", log, "--data", sessions, "--dry-run"],
        "repair --yes": ["repair", log, "--data", sessions, "--yes"],
    }[command]
    return runner.invoke(app, [str(a) for a in args])


def check(command: str, result, log: Path, before, after) -> None:
    where = f"{command} on {log.name}"
    assert result.exit_code in (0, 1, 2), (where, result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), where
    assert "Traceback" not in result.output and "internal error" not in result.output, where
    if result.exit_code == 2:
        errors = [x for x in result.stderr.splitlines() if x.startswith("error: ")]
        assert errors and any(str(log) in x for x in errors), (where, result.stderr)
        # and where in it: frame, byte offset or line
        assert any(re.search(r"\((frame|byte|line) \d+", x) for x in errors), (where, errors)
    if result.exit_code == 2 or command in READ_ONLY:
        assert after == before, (where, "wrote something")


@pytest.mark.timeout(600)
@FUZZ
@given(corrupted_logs())
def test_every_offline_command_on_a_corrupted_session(tmp_path_factory, case):
    scenario, name, data = case
    root = tmp_path_factory.mktemp(scenario)
    sessions, log = install(root, name, data)
    before = tree_state(root)
    for command in READ_ONLY:
        result = run(command, log, sessions)
        check(command, result, log, before, tree_state(root))
    for command in ("clean --yes", "repair --yes"):
        shutil.rmtree(root)
        sessions, log = install(root, name, data)
        before = tree_state(root)
        result = run(command, log, sessions)
        check(command, result, log, before, tree_state(root))
        if result.exit_code == 0 and tree_state(root) != before:
            # what was written reads strictly to its last line; a repaired log is closed
            tracker = OpenTurnTracker()
            for record in open_log(log).records():
                tracker.observe(record)
            assert command == "clean --yes" or not tracker.turn_open
    shutil.rmtree(root)
