"""``looprescue report``: one self-contained HTML page for a set of sessions, checked as data,
as markup and in a real browser (headless Debian Chromium)."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks.synthetic_session import build_large_session
from tests.paths import SESSIONS
from tests.support.browser import chromium_page

from looprescue.config import LoopRescueConfig
from looprescue.detect import scan_text
from looprescue.dsh import find_session_logs, open_log
from looprescue.report import build_session, render_report
from looprescue.report.session import CONTEXT_CHARS, MAX_LOOPS, PRUNED_CHARS

CONFIG = LoopRescueConfig()


def fixture(scenario: str) -> Path:
    return SESSIONS / scenario / "session" / "session.v4.jsonl.zstd"


def run_report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "looprescue", "report", *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


@functools.cache
def fixture_page(directory: str) -> tuple[Path, str]:
    """The report of every fixture session, written by the command itself."""
    out = Path(directory) / "report.html"
    result = run_report(str(SESSIONS), "-o", str(out))
    assert result.returncode == 0, result.stderr
    return out, out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def page_file(tmp_path_factory) -> tuple[Path, str]:
    return fixture_page(str(tmp_path_factory.mktemp("report")))


def reasoning_block(scenario: str) -> str:
    for event in open_log(fixture(scenario)).events():
        if event["type"] == "assistant/message":
            for block in event["data"]["message"]["content"]:
                if block["type"] == "reasoning":
                    return block["text"]
    raise AssertionError(scenario)


def test_a_loop_is_shown_in_its_context_kept_part_readable_cut_part_marked():
    report = build_session(fixture("a_reasoning_loop"), CONFIG)
    (loop,) = report.loops
    text = reasoning_block("a_reasoning_loop")
    (hit,) = scan_text(text, "reasoning")
    assert loop.found and loop.finding.prune_offset == hit.prune_offset
    onset = min(hit.loop_start, hit.prune_offset)
    assert loop.before == text[max(0, onset - CONTEXT_CHARS) : onset]
    assert loop.pruned == text[hit.prune_offset : hit.prune_offset + PRUNED_CHARS]
    assert loop.pruned_more == len(text) - hit.prune_offset - len(loop.pruned)
    assert report.turns[0].prompt.startswith("Explain how the profile config loader")


def test_a_signal_carries_its_evidence_events():
    report = build_session(fixture("d_tool_loop"), CONFIG)
    (signal,) = report.signals
    assert signal.sub == "repeat:bash" and signal.evidence == (18, 26, 34, 45, 53, 64)
    events = [report.evidence[seq] for seq in signal.evidence]
    assert {e.type for e in events} == {"tool/call"}
    assert all(e.text.startswith("bash(") and '"command":"ls"' in e.text for e in events)
    assert [t.tool_calls for t in report.turns] == [6]


def test_the_command_writes_one_self_contained_page(page_file):
    _, html = page_file
    logs = find_session_logs([SESSIONS])
    assert html.count('<tr class="session-row') == len(logs)
    assert html.count('<section class="session') == len(logs)
    # nothing to fetch: no scripts, no stylesheets, images, fonts or frames from anywhere
    assert not re.search(r"<(script|link|img|iframe|object|embed)\b", html)
    assert not re.search(r"(src|href)=\"(https?:)?//", html)
    assert "default-src 'none'" in html


def test_session_text_is_escaped_never_markup(tmp_path):
    """A title and a loop made of markup show as text; nothing of them becomes an element."""
    source = fixture("a_reasoning_loop").with_suffix("")  # the plain JSONL copy
    session_dir = tmp_path / "sessions" / "--p--" / "session-x"
    session_dir.mkdir(parents=True)
    hostile = source.read_text(encoding="utf-8")
    hostile = hostile.replace("Explain how the profile config", "<img src=x onerror=alert(1)> & co")
    hostile = hostile.replace("Producing.", "<script>alert(2)</script>")
    (session_dir / "session.v4.jsonl").write_text(hostile, encoding="utf-8")
    out = tmp_path / "r.html"
    result = run_report(str(session_dir), "-o", str(out))
    assert result.returncode == 0, result.stderr
    html = out.read_text(encoding="utf-8")
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; co" in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "<script" not in html and "<img" not in html


def test_a_large_session_gives_a_page_of_bounded_size(tmp_path):
    log = build_large_session(tmp_path / "session-big" / "session.v4.jsonl.zstd", 6_000_000)
    report = build_session(log, CONFIG)
    assert report.loops_total > MAX_LOOPS and len(report.loops) == MAX_LOOPS
    html = render_report([report])
    assert len(html) < 600_000  # a 6 MB log: excerpts, not the log
    assert f"{report.loops_total - MAX_LOOPS} more loops" in html
    # the timeline still marks every turn with a loop, shown in detail or not
    assert html.count('class="cell') == len(report.turns)
    looping_turns = {loop.finding.turn for loop in report.loops}
    assert len(report.loop_counts) > len(looping_turns)
    assert len(re.findall(r'class="cell loop', html)) == len(report.loop_counts)


def test_unreadable_input_is_listed_and_exits_two(tmp_path):
    broken = tmp_path / "sessions" / "--p--" / "session-bad"
    broken.mkdir(parents=True)
    (broken / "session.v4.jsonl").write_text('{"type": "session", "version": 4}\nnot json\n')
    out = tmp_path / "r.html"
    result = run_report(str(broken.parent.parent), str(fixture("d_tool_loop")), "-o", str(out))
    assert result.returncode == 2, result.stderr
    assert "error:" in result.stderr and "session-bad" in result.stderr
    html = out.read_text(encoding="utf-8")
    assert "cannot read this session" in html and "retry-storm repeat:bash" in html


def test_the_page_in_headless_chromium(page_file, tmp_path):
    """Rendered by a real browser: the key elements exist, links land, evidence expands."""
    path, _ = page_file
    logs = find_session_logs([SESSIONS])
    requests: list[str] = []
    with chromium_page(tmp_path / "profile", viewport={"width": 1280, "height": 900}) as page:
        page.on("request", lambda request: requests.append(request.url))
        page.goto(path.as_uri())
        assert page.title() == f"looprescue report: {len(logs)} sessions"
        assert page.locator("tr.session-row").count() == len(logs)
        assert page.locator("section.session").count() == len(logs)
        assert page.locator(".timeline .cell").count() >= len(logs)
        # a loop: the kept text and the cut span, side by side in one block
        loop = page.locator("article.card.loop").first
        assert loop.locator("mark.pruned").inner_text().strip()
        assert loop.locator(".before").inner_text().strip()
        # a finding badge in the session list jumps to its card
        page.locator("tr.session-row a.badge.signal").first.click()
        target = page.evaluate("location.hash")
        assert target and page.locator(f"article{target}").is_visible()
        # evidence is folded away until asked for
        card = page.locator(f"article{target}")
        table = card.locator("details table.evidence")
        assert not table.is_visible()
        card.locator("details summary").click()
        assert table.is_visible() and table.locator("tbody tr").count() >= 1
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        assert page.evaluate("document.scripts.length") == 0
    assert (tmp_path / "report.png").stat().st_size > 10_000
    assert requests == [path.as_uri()]  # the page itself, nothing else


def test_a_page_that_cannot_be_written_is_an_error_and_leaves_nothing(tmp_path):
    result = run_report(str(fixture("d_tool_loop")), "-o", str(tmp_path / "missing" / "r.html"))
    assert result.returncode == 2 and "cannot write the report" in result.stderr
    assert list(tmp_path.iterdir()) == []
