"""``looprescue clean`` on copies of the real fixtures: what changes, what must not."""

from __future__ import annotations

import json
import os

import pytest
import zstandard
from tests.test_dsh_helpers import fixture_log, install_session, raw_frames, tree_state
from typer.testing import CliRunner

from looprescue.cli import app
from looprescue.dsh import SessionChangedError, SessionFormatError, SessionLock, open_log
from looprescue.dsh.backup import backup_path_for, make_backup, restore_backup
from looprescue.dsh.edit import SessionEditor
from looprescue.dsh.findings import scan_events
from looprescue.dsh.lines import iter_lines
from looprescue.dsh.prune import stream_problems
from looprescue.dsh.writer import LogWriter

runner = CliRunner()


def clean(*args: object):
    return runner.invoke(app, ["clean", *map(str, args)])


def lines_of(path):
    return [line.raw for line in iter_lines(path, open_log(path).encoding)]


def message(path, seq):
    return next(e for e in open_log(path).events() if e["seq"] == seq)


@pytest.mark.parametrize(
    ("scenario", "seq", "cut_blocks"),
    [
        ("a_reasoning_loop", 17, [(0, "reasoning")]),
        ("b_verbatim_cycle", 17, [(1, "text")]),
        # one 45-char sentence 8 times in the reasoning, and a 40-char sentence 20 times in text
        ("h_stream_cut", 21, [(0, "reasoning"), (1, "text")]),
        ("j_openai_compat_provider", 32, [(0, "reasoning")]),
    ],
)
def test_clean_cuts_only_the_looping_message(tmp_path, scenario, seq, cut_blocks):
    data = tmp_path / "sessions"
    log = install_session(data, scenario)
    original = fixture_log(scenario)
    result = clean(log, "--data", data, "--yes")
    assert result.exit_code == 0, result.output

    before, after = lines_of(original), lines_of(log)
    assert len(before) == len(after)
    changed = [n for n, (x, y) in enumerate(zip(before, after, strict=True)) if x != y]
    assert changed == [seq + 1]  # line n+1 holds seq n; every other line is byte-identical

    old, new = message(original, seq), message(log, seq)
    for block, channel in cut_blocks:
        old_text = old["data"]["message"]["content"][block]["text"]
        new_text = new["data"]["message"]["content"][block]["text"]
        kept, marker = new_text.rsplit("\n", 1)
        assert old_text.startswith(kept) and len(kept) < len(old_text)
        assert marker == f"〔{len(old_text) - len(kept)} chars of repeated {channel} removed〕"
    assert "replayState" not in new["data"]["message"]["source"]
    assert stream_problems(new) == []
    cut = {block for block, _ in cut_blocks}
    other = [b for i, b in enumerate(old["data"]["message"]["content"]) if i not in cut]
    assert [b for i, b in enumerate(new["data"]["message"]["content"]) if i not in cut] == other

    # Rescanning finds no loop in the cleaned message.
    new_log = open_log(log)
    findings = scan_events(new_log.events(), new_log.session_id, str(log))
    assert [f for f in findings if f.is_loop and f.seq == seq] == []

    # Backup beside the data dir, identical to the original.
    backup = tmp_path / "sessions-loop-rescue-backup" / log.relative_to(data)
    assert backup.read_bytes() == original.read_bytes()
    assert log.stat().st_mode & 0o777 == 0o600


def test_untouched_frames_are_copied_byte_for_byte(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    assert clean(log, "--data", data, "--yes").exit_code == 0
    old, new = raw_frames(fixture_log("a_reasoning_loop")), raw_frames(log)
    assert len(old) == len(new) == 7
    assert new[:6] == old[:6]  # the message is in the last frame
    assert new[6] != old[6]
    params = zstandard.get_frame_parameters(new[6])
    assert params.has_checksum and params.content_size == zstandard.CONTENTSIZE_UNKNOWN
    # One multi-frame stream, as `zstd -dc` reads it.
    whole = zstandard.ZstdDecompressor().stream_reader(log.open("rb"), read_across_frames=True)
    assert whole.read().count(b"\n") == 21


def test_dry_run_shows_changes_and_writes_nothing(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "b_verbatim_cycle")
    state = tree_state(tmp_path)
    result = clean(log, "--data", data, "--dry-run")
    assert result.exit_code == 0
    out = result.stdout
    assert "seq 17 (t1s1, line 19): 1090 chars removed" in out
    assert "marker: 〔1090 chars of repeated text removed〕" in out
    assert "before: " in out and "after: " in out and "nothing was written" in out
    assert tree_state(tmp_path) == state


def test_no_marker_and_chinese_marker(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "b_verbatim_cycle")
    assert clean(log, "--data", data, "--yes", "--no-marker").exit_code == 0
    text = message(log, 17)["data"]["message"]["content"][1]["text"]
    original = message(fixture_log("b_verbatim_cycle"), 17)["data"]["message"]["content"][1]
    assert original["text"].startswith(text) and "〔" not in text

    data2 = tmp_path / "zh" / "sessions"
    log2 = install_session(data2, "b_verbatim_cycle")
    assert clean(log2, "--data", data2, "--yes", "--language", "zh").exit_code == 0
    text2 = message(log2, 17)["data"]["message"]["content"][1]["text"]
    assert text2.endswith("〔已删除 1090 个字符的重复内容〕")


def test_undo_restores_the_original(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    original = log.read_bytes()
    assert clean(log, "--data", data, "--yes").exit_code == 0
    assert log.read_bytes() != original
    result = clean(log, "--data", data, "--undo", "--yes")
    assert result.exit_code == 0, result.output
    assert log.read_bytes() == original
    assert log.stat().st_mode & 0o777 == 0o600
    again = clean(log, "--data", data, "--undo", "--yes")
    assert again.exit_code == 2 and "no backup to restore" in again.stderr


def test_backups_rotate_and_undo_walks_back(tmp_path):
    log = tmp_path / "sessions" / "--p--" / "s" / "session.v4.jsonl.zstd"
    log.parent.mkdir(parents=True)
    backup = backup_path_for(log, tmp_path / "sessions")
    assert backup == tmp_path / "sessions-loop-rescue-backup" / "--p--" / "s" / log.name
    versions = [b"v1", b"v2", b"v3"]
    for content in versions:
        log.write_bytes(content)
        make_backup(log, backup)
        stamp = 1_700_000_000 + int(content[1:])  # distinct mtimes name the rotated copies
        os.utime(backup, (stamp, stamp))
    log.write_bytes(b"v4")
    for expected in reversed(versions):
        restore_backup(log, backup)
        assert log.read_bytes() == expected
    assert not backup.exists()


def test_healthy_session_is_left_alone(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "g_healthy_long_answer")
    state = tree_state(tmp_path)
    result = clean(log, "--data", data, "--yes")
    assert result.exit_code == 0 and "nothing to change" in result.stdout
    assert tree_state(tmp_path) == state


def test_refuses_while_dsh_holds_the_lock_and_force_overrides(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "b_verbatim_cycle")
    state = tree_state(tmp_path)
    with SessionLock(log.parent):
        result = clean(log, "--data", data, "--yes")
        assert result.exit_code == 2
        assert "DSH is using this session" in result.stderr
        assert "nothing was written" in result.stderr
        assert tree_state(tmp_path) == state
        forced = clean(log, "--data", data, "--yes", "--force")
        assert forced.exit_code == 0, forced.output
        assert "editing anyway (--force)" in forced.stderr
    assert message(log, 17) != message(fixture_log("b_verbatim_cycle"), 17)


def test_session_id_argument_and_picker(tmp_path):
    data = tmp_path / "sessions"
    install_session(data, "g_healthy_long_answer")
    log_a = install_session(data, "a_reasoning_loop")
    log_b = install_session(data, "b_verbatim_cycle")
    # By id prefix.
    result = clean("session-d71e2eed", "--data", data, "--dry-run")
    assert result.exit_code == 0 and str(log_b) in result.stdout
    # No argument: only looping sessions are listed, newest first; Enter picks the newest.
    result = runner.invoke(app, ["clean", "--data", str(data), "--dry-run"], input="\n")
    assert result.exit_code == 0, result.output
    listing = [x for x in result.stdout.splitlines() if x.strip()[:1].isdigit()]
    newest_first = sorted(
        [log_a, log_b], key=lambda p: list(open_log(p).events())[-1]["time"], reverse=True
    )
    assert [x.split()[1] for x in listing] == [p.parent.name for p in newest_first]
    assert f"{newest_first[0]}: 1 assistant message(s) to cut" in result.stdout
    # Pick number 2.
    result = runner.invoke(app, ["clean", "--data", str(data), "--dry-run"], input="2\n")
    assert f"{newest_first[1]}: 1 assistant message(s) to cut" in result.stdout


def test_plain_jsonl_log_stays_plain(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "b_verbatim_cycle", plain=True)
    assert clean(log, "--data", data, "--yes").exit_code == 0
    assert open_log(log).encoding == "plain"
    before = fixture_log("b_verbatim_cycle").with_suffix("").read_bytes().splitlines()
    after = log.read_bytes().splitlines()
    assert [n for n, (x, y) in enumerate(zip(before, after, strict=True)) if x != y] == [18]


def test_json_plan(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    result = clean(log, "--data", data, "--dry-run", "--json")
    plan = json.loads(result.stdout.splitlines()[0])
    [change] = plan["changes"]
    assert change["seq"] == 17 and change["blocks"][0]["rule"] == "cycle"
    assert change["removedChars"] == change["blocks"][0]["removedChars"] > 4000


def test_edit_refused_when_the_log_changes_meanwhile(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    with SessionEditor(log, data_dir=data) as editor:
        with log.open("ab") as fh:  # a writer we could not lock out appends a frame
            fh.write(raw_frames(log)[-1])
        with pytest.raises(SessionChangedError, match="changed while it was being edited"):
            editor.backup()
    assert not (tmp_path / "sessions-loop-rescue-backup").exists()


def test_failed_verification_leaves_the_original_untouched(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    before = log.read_bytes()
    writer = LogWriter(log, "zstd")
    writer.write_batch([b'{"type":"session"}'])

    def reject(temp):
        raise SessionFormatError("verification failed: test", path=temp)

    with pytest.raises(SessionFormatError, match="verification failed"):
        writer.commit(reject, lambda: None)
    assert log.read_bytes() == before
    assert sorted(p.name for p in log.parent.iterdir()) == ["session.lock", "session.v4.jsonl.zstd"]


def _split_line_layout(log):
    """The same lines, but the looping message (line 19) runs across two frames."""
    text = zstandard.ZstdDecompressor().stream_reader(log.open("rb"), read_across_frames=True)
    header, *events = text.read().splitlines(keepends=True)
    body = b"".join(events)
    middle = body.index(events[17]) + len(events[17]) // 2
    return [header, body[:middle], body[middle:]]


@pytest.mark.parametrize("layout", ["trailing empty frame", "line across frames"])
def test_what_a_dry_run_plans_the_real_clean_writes(tmp_path, layout):
    from looprescue.dsh.frames import compress_frame

    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    if layout == "trailing empty frame":
        log.write_bytes(log.read_bytes() + compress_frame(b""))
    else:
        log.write_bytes(b"".join(compress_frame(part) for part in _split_line_layout(log)))
    dry = clean(log, "--data", data, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    [planned] = json.loads(dry.stdout.splitlines()[0])["changes"]
    real = clean(log, "--data", data, "--yes", "--json")
    assert real.exit_code == 0, real.output
    assert json.loads(real.stdout.splitlines()[0])["changes"] == [planned]
    assert message(log, 17) != message(fixture_log("a_reasoning_loop"), 17)
    before, after = lines_of(fixture_log("a_reasoning_loop")), lines_of(log)
    assert [n for n, (x, y) in enumerate(zip(before, after, strict=True)) if x != y] == [18]


def test_skippable_frames_are_kept_by_clean_and_repair(tmp_path):
    import struct

    skippable = struct.pack("<II", 0x184D2A50, 5) + b"other"
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    log.write_bytes(skippable + log.read_bytes() + skippable)
    assert clean(log, "--data", data, "--yes").exit_code == 0
    cleaned = log.read_bytes()
    assert cleaned.startswith(skippable) and cleaned.endswith(skippable)
    assert message(log, 17) != message(fixture_log("a_reasoning_loop"), 17)
    log.write_bytes(cleaned[: -len(skippable) - 5])  # now the last data frame is torn
    result = runner.invoke(app, ["repair", str(log), "--data", str(data), "--yes"])
    assert result.exit_code == 0, result.output
    assert log.read_bytes().startswith(skippable)
    events = list(open_log(log).events())
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "turn/end" and len(events) >= 19
