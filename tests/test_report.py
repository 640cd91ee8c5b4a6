"""``looprescue report``: one self-contained HTML page for a set of sessions, checked as data,
as markup and in a real browser (headless Debian Chromium)."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
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
from looprescue.report import SessionReport, build_session, render_report
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


def page_json(html: str) -> dict:
    """The data the page carries (and its script renders)."""
    match = re.search(
        r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S
    )
    assert match is not None
    return json.loads(match.group(1))


def test_the_command_writes_one_self_contained_page(page_file):
    _, html = page_file
    logs = find_session_logs([SESSIONS])
    data = page_json(html)
    assert len(data["sessions"]) == data["totals"]["sessions"] == len(logs)
    # nothing to fetch: no stylesheets, images, fonts, frames or scripts from anywhere
    assert not re.search(r"<(link|img|iframe|object|embed)\b", html)
    assert not re.search(r"\b(src|href)=\"(https?:)?//", html)
    assert not re.search(r"<script[^>]*\bsrc=", html)
    # one inline script, allowed by its hash and nothing else
    (script,) = re.findall(r"<script>(.*?)</script>", html, re.S)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    policy = re.search(r'Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert "default-src 'none'" in policy and f"script-src 'sha256-{digest}'" in policy


def test_sessions_come_costliest_loops_first_with_tokens_and_money(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text('prices:\n  "deepseek-*": {input: 0.27, output: 1.10}\n')
    out = tmp_path / "r.html"
    result = run_report(str(SESSIONS), "-o", str(out), "--config", str(config), "--json")
    assert result.returncode == 0, result.stderr
    records = {r["session"]: r for r in map(json.loads, result.stdout.splitlines())}
    sessions = page_json(out.read_text(encoding="utf-8"))["sessions"]
    looping = [s for s in sessions if s["loops"]]
    assert looping and sessions[: len(looping)] == looping  # loops first
    costs = [s["loopDollars"] for s in looping]
    assert costs == sorted(costs, reverse=True) and all(c > 0 for c in costs)
    # a loop's tokens: its share of its message's usage, as scan counts them
    scan = subprocess.run(
        [sys.executable, "-m", "looprescue", "scan", str(fixture("a_reasoning_loop")), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    (finding,) = map(json.loads, scan.stdout.splitlines())
    record = records[finding["session"]]
    assert finding["tokens_from"] == "usage" and record["loopTokens"] == finding["tokens"] > 0
    assert record["loopDollars"] == round(finding["tokens"] * 1.10 / 1e6, 6)
    usage = [
        e["data"]["usage"]
        for e in open_log(fixture("a_reasoning_loop")).events()
        if e["type"] == "assistant/message"
    ]
    assert record["inputTokens"] == sum(u["inputTokens"] for u in usage)
    assert record["dollars"] == round(
        (record["inputTokens"] * 0.27 + record["outputTokens"] * 1.10) / 1e6, 6
    )
    # what to run next, and what clean would remove
    shown = next(s for s in sessions if s["id"] == finding["session"])
    assert shown["clean"] == {"messages": 1, "chars": finding["loop_chars"]}
    assert [command for _, command in shown["next"]] == [
        f"looprescue clean {finding['session']} --dry-run",
        f"looprescue clean {finding['session']}",
    ]
    # without prices: tokens, no money
    plain = render_report([build_session(fixture("a_reasoning_loop"), CONFIG)])
    (view,) = page_json(plain)["sessions"]
    assert view["loopDollars"] is None and view["loopTokens"] == finding["tokens"]


def test_session_text_is_escaped_never_markup(tmp_path):
    """A title and a loop made of markup stay text: in the page's data and in the browser."""
    source = fixture("a_reasoning_loop").with_suffix("")  # the plain JSONL copy
    session_dir = tmp_path / "sessions" / "--p--" / "session-x"
    session_dir.mkdir(parents=True)
    hostile = source.read_text(encoding="utf-8")
    hostile = hostile.replace("Explain how the profile config", "<img src=x onerror=alert(1)> & co")
    hostile = hostile.replace("Producing.", "</script><script>alert(2)</script>")
    (session_dir / "session.v4.jsonl").write_text(hostile, encoding="utf-8")
    out = tmp_path / "r.html"
    result = run_report(str(session_dir), "-o", str(out))
    assert result.returncode == 0, result.stderr
    html = out.read_text(encoding="utf-8")
    assert "<img" not in html and "alert(2)</script>" not in html
    (session,) = page_json(html)["sessions"]
    assert session["title"].startswith("<img src=x onerror=alert(1)> & co")
    with chromium_page(tmp_path / "profile", viewport={"width": 1000, "height": 800}) as page:
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(out.as_uri() + "#s1")
        assert page.locator("section.session h2").inner_text() == session["title"]
        assert "alert(2)" in page.locator("article.card.loop").first.inner_text()
        assert page.evaluate("document.images.length") == 0 and dialogs == []


def test_a_large_session_gives_a_page_of_bounded_size(tmp_path):
    log = build_large_session(tmp_path / "session-big" / "session.v4.jsonl.zstd", 6_000_000)
    report = build_session(log, CONFIG)
    assert report.loops_total > MAX_LOOPS and len(report.loops) == MAX_LOOPS
    html = render_report([report])
    assert len(html) < 600_000  # a 6 MB log: excerpts, not the log
    (session,) = page_json(html)["sessions"]
    assert session["moreLoops"] == report.loops_total - MAX_LOOPS
    # the timeline still marks every turn with a loop, shown in detail or not
    assert len(session["cells"]) == len(report.turns)
    looping_turns = {loop.finding.turn for loop in report.loops}
    assert len(report.loop_counts) > len(looping_turns)
    assert sum("loop" in cell[2] for cell in session["cells"]) == len(report.loop_counts)


def test_unreadable_input_is_listed_and_exits_two(tmp_path):
    broken = tmp_path / "sessions" / "--p--" / "session-bad"
    broken.mkdir(parents=True)
    (broken / "session.v4.jsonl").write_text('{"type": "session", "version": 4}\nnot json\n')
    out = tmp_path / "r.html"
    result = run_report(str(broken.parent.parent), str(fixture("d_tool_loop")), "-o", str(out))
    assert result.returncode == 2, result.stderr
    assert "error:" in result.stderr and "session-bad" in result.stderr
    sessions = page_json(out.read_text(encoding="utf-8"))["sessions"]
    (bad,) = [s for s in sessions if s["status"] == "error"]
    assert "session-bad" in bad["path"] and bad["error"]
    assert bad["next"][0][1].startswith("looprescue repair ")
    (good,) = [s for s in sessions if s["status"] != "error"]
    assert [k[0] for k in good["kinds"]] == ["retry-storm repeat:bash"]


def many_sessions(count: int) -> list[SessionReport]:
    """Reports of ``count`` sessions in two projects, every third one with a loop."""
    reports = []
    for number in range(count):
        report = SessionReport(
            f"/data/--home-ana-proj{number % 2}--/session-{number:04d}/session.v4.jsonl",
            session_id=f"session-{number:04d}-aaaa-bbbb",
            title=f"task number {number}",
            created=1_790_000_000_000 + number,
            last_event=1_790_000_000_000 + number,
        )
        if number % 3 == 0:
            report.loops_total = 1
            report.loop_kinds = {"cycle · reasoning": 1}
            report.loop_tokens = {"m": 10 * number}
            report.clean_messages, report.clean_chars = 1, 40 * number
        reports.append(report)
    return reports


@pytest.mark.parametrize("width", [1400, 800])
def test_the_page_in_headless_chromium(page_file, tmp_path, width):
    """Rendered by a real browser at a wide and a narrow width: nothing overflows sideways,
    the key elements show, links land, evidence expands, filters and search narrow the list."""
    path, html = page_file
    sessions = page_json(html)["sessions"]
    requests: list[str] = []
    errors: list[str] = []
    with chromium_page(tmp_path / "profile", viewport={"width": width, "height": 900}) as page:
        page.on("request", lambda request: requests.append(request.url))
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(path.as_uri())

        def fits() -> bool:
            return page.evaluate(
                "document.documentElement.scrollWidth <= window.innerWidth"
                " && document.body.scrollWidth <= window.innerWidth"
            )

        assert page.title() == f"looprescue report: {len(sessions)} sessions"
        assert page.locator("tr.session-row").count() == len(sessions)
        for selector in ("#totals", "#search", "#status", "#sort", "tr.session-row >> nth=0"):
            assert page.locator(selector).is_visible(), selector
        first = page.locator("tr.session-row").first
        assert first.get_attribute("data-session") == sessions[0]["id"]
        assert first.locator("td.cost").is_visible() and "tokens" in first.inner_text()
        assert fits()
        page.screenshot(path=str(tmp_path / "list.png"), full_page=True)
        # a finding badge in the list opens its session at the card
        page.locator("tr.session-row a.badge.signal").first.click()
        target = page.evaluate("location.hash")
        card = page.locator(f"article{target}")
        # the page routes on hashchange, an event the click only queues: wait for the card
        # (a loaded machine showed it a moment after the hash changed)
        card.wait_for(state="visible", timeout=5_000)
        assert target and card.is_visible()
        table = card.locator("details table.evidence")
        assert not table.is_visible()
        card.locator("details summary").click()
        assert table.is_visible() and table.locator("tbody tr").count() >= 1
        assert fits()
        # a looping session: its loop in context, what to run next
        looping = next(s for s in sessions if any(not c["narration"] for c in s["loopCards"]))
        page.goto(path.as_uri() + "#" + looping["anchor"])
        section = page.locator("section.session")
        assert section.locator("article.card.loop mark.pruned").first.inner_text().strip()
        assert section.locator(".before").first.inner_text().strip()
        commands = section.locator(".next pre.command")
        assert commands.first.is_visible() and "looprescue" in commands.first.inner_text()
        assert section.locator(".timeline .cell").count() >= 1
        assert fits()
        page.screenshot(path=str(tmp_path / "session.png"), full_page=True)
        # search by an id prefix, then filter by status
        page.fill("#search", sessions[-1]["id"][:16])
        assert page.locator("tr.session-row").count() == 1
        page.fill("#search", "")
        page.select_option("#status", "clean")
        clean = page.locator("tr.session-row")
        assert clean.count() == sum(s["status"] == "clean" for s in sessions) > 0
        assert all("no findings" in clean.nth(i).inner_text() for i in range(clean.count()))
        assert page.evaluate("document.scripts.length") == 2  # the data and the code
    assert (tmp_path / "list.png").stat().st_size > 10_000
    assert (tmp_path / "session.png").stat().st_size > 10_000
    assert errors == []
    assert requests == [path.as_uri()] * len(requests) and requests  # the page, nothing else


def test_thousands_of_sessions_page_through_fifty_at_a_time(tmp_path):
    out = tmp_path / "many.html"
    out.write_text(render_report(many_sessions(3900)), encoding="utf-8")
    assert out.stat().st_size < 8_000_000
    with chromium_page(tmp_path / "profile", viewport={"width": 800, "height": 900}) as page:
        page.goto(out.as_uri())
        rows = page.locator("tr.session-row")
        assert rows.count() == 50
        assert "of 3,900" in page.locator("#shown").inner_text()
        # costliest loops first: session 3897 has the most loop tokens
        assert rows.first.get_attribute("data-session") == "session-3897-aaaa-bbbb"
        page.click("#next")
        assert rows.count() == 50 and "51–100" in page.locator("#shown").inner_text()
        page.select_option("#status", "loops")
        assert "of 1,300" in page.locator("#shown").inner_text()
        page.select_option("#project", "home-ana-proj1")
        page.fill("#search", "session-12")  # ids (and paths) of sessions 1200 to 1299
        wanted = [n for n in range(1200, 1300) if n % 3 == 0]
        assert rows.count() == sum(1 for n in wanted if n % 2 == 1)
        page.select_option("#project", "")
        assert rows.count() == len(wanted)
        page.fill("#search", "no such task")
        assert rows.count() == 0 and "no session matches" in page.locator("#shown").inner_text()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_a_page_that_cannot_be_written_is_an_error_and_leaves_nothing(tmp_path):
    result = run_report(str(fixture("d_tool_loop")), "-o", str(tmp_path / "missing" / "r.html"))
    assert result.returncode == 2 and "cannot write the report" in result.stderr
    assert list(tmp_path.iterdir()) == []
