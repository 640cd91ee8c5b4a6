"""Runs real agent CLIs headless through ``looprescue proxy`` against a scripted model.

For each client and scenario: a direct run (client -> scripted model), then one run per proxy
mode (client -> proxy -> scripted model). Each run has a fresh HOME and its own scripted
model, proxy and byte tap, all on 127.0.0.1 inside a network namespace that has only the
loopback interface (``unshare -n``; needs root), so nothing a client tries can leave the
machine. What a run must show:

* every run: the client exits 0 and its answer is the scenario's;
* ``observe`` (and ``rescue`` of a scenario with no loop): the same answer as the direct run;
* ``rescue`` of a looping scenario: the proxy cut the loop (its audit log says so) and no two
  copies of the loop's unit are in the client's output or anything it wrote under HOME;
* the tool-loop scenario: ``observe`` records the loop and changes nothing; ``rescue`` lets the
  configured repeats and one steered request reach the model, then the client shows the
  guard's stop message and ends its turn.

A result the harness expects to fail (a proxy bug or gap, named in ``KNOWN_FAILURES``) is
shown as ``known``; it turns into an error when it passes, so the list stays true.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tests.support.scripted_upstream import ScriptedUpstream

from e2e.clients.agents import AGENTS, Agent, Finished, RunDirs
from e2e.clients.install import CLIENTS_DIR, ensure_installed
from e2e.clients.scenarios import (
    SCENARIOS,
    TOOL_LOOP_CALLS,
    Responder,
    Scenario,
    tool_results,
)
from e2e.clients.tap import Tap
from looprescue.config import LoopRescueConfig
from looprescue.rescue.marker import TAG as PROXY_TAG

MODES = ("observe", "rescue")
NOTES_TEXT = "hello from the notes file\n"


def proxy_build() -> str:
    """ "compiled" when the proxy's wire modules were built with mypyc, else "pure"."""
    from looprescue.wire import base

    return "compiled" if str(base.__file__).endswith(".so") else "pure"


@dataclass(frozen=True)
class Known:
    """Checks that fail today for a reason outside the harness.

    "*" matches any client, scenario or build; a check "*" covers every check."""

    client: str
    scenario: str
    mode: str
    checks: tuple[str, ...]
    reason: str
    build: str = "*"  # "compiled", "pure" or "*"

    def covers(self, run: Run) -> bool:
        return all(
            want in ("*", got)
            for want, got in (
                (self.client, run.client),
                (self.scenario, run.scenario.name),
                (self.mode, run.mode),
                (self.build, proxy_build()),
            )
        )


# A proxy change that fixes one of these makes the run report it as FIXED? (exit 1) until it
# is taken off this list, so the list stays true.
KNOWN_FAILURES: tuple[Known, ...] = ()


# --------------------------------------------------------------------------- one run


@dataclass
class Run:
    client: str
    scenario: Scenario
    mode: str  # "direct" or a proxy mode
    dirs: RunDirs
    returncode: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""
    finished: Finished = field(default_factory=lambda: Finished(""))
    requests: list[dict] = field(default_factory=list)
    audit: list[dict] = field(default_factory=list)
    exchanges: list = field(default_factory=list)
    proxy_log: str = ""

    @property
    def label(self) -> str:
        return f"{self.client} × {self.scenario.name} × {self.mode}"

    def loop_copies_seen(self) -> list[str]:
        """Where two copies of the loop's unit in a row are: stdout, stderr, files under HOME and
        the working folder (a client's transcripts, sessions and logs)."""
        unit = self.scenario.loop_unit
        if not unit:
            return []
        needle = (unit * 2).encode()
        found = [
            name
            for name, text in (("stdout", self.stdout), ("stderr", self.stderr))
            if needle in text.encode()
        ]
        for folder in (self.dirs.home, self.dirs.work):
            for path in sorted(folder.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    try:
                        if needle in path.read_bytes():
                            found.append(str(path.relative_to(self.dirs.root)))
                    except OSError:
                        continue
        return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Proxy:
    """``looprescue proxy`` as a user starts it, in one mode, with an audit log."""

    def __init__(self, upstream: str, mode: str, folder: Path) -> None:
        self.port = free_port()
        self.audit = folder / "audit.jsonl"
        self.log = folder / "proxy.log"
        command = [
            sys.executable, "-m", "looprescue", "proxy",
            "--upstream", upstream,
            "--port", str(self.port),
            "--mode", mode,
            "--audit-log", str(self.audit),
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"looprescue proxy exited at start:\n{self.log.read_text()}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2)
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("looprescue proxy did not start within 60 s") from None
                time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def audit_records(self) -> list[dict]:
        if not self.audit.exists():
            return []
        lines = self.audit.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]


def run_client(agent: Agent, scenario: Scenario, mode: str, root: Path, timeout: float) -> Run:
    dirs = RunDirs(root / agent.name / scenario.name / mode)
    if dirs.root.exists():
        shutil.rmtree(dirs.root)
    dirs.create()
    (dirs.work / "notes.txt").write_text(NOTES_TEXT, encoding="utf-8")
    run = Run(agent.name, scenario, mode, dirs)
    responder = Responder(agent.list_tool)
    with ScriptedUpstream(answer_titles=False) as upstream:
        upstream.add_rule(lambda _request: True, responder, label="scenario")
        proxy = Proxy(upstream.base_url, mode, dirs.root) if mode != "direct" else None
        try:
            with Tap(proxy.port if proxy else upstream.port, dirs.root / "wire") as tap:
                argv, env = agent.command(dirs, tap.base_url, scenario.full_prompt())
                started = time.monotonic()
                process = subprocess.Popen(
                    argv,
                    cwd=dirs.work,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
                try:
                    out, err = process.communicate(timeout=timeout)
                except subprocess.TimeoutExpired:
                    run.timed_out = True
                    os.killpg(process.pid, signal.SIGKILL)
                    out, err = process.communicate()
                run.seconds = time.monotonic() - started
                run.returncode = process.returncode
                run.stdout = out.decode(errors="replace")
                run.stderr = err.decode(errors="replace")
                run.exchanges = tap.exchanges()
        finally:
            if proxy is not None:
                proxy.stop()
                run.audit = proxy.audit_records()
                run.proxy_log = proxy.log.read_text(errors="replace")
        for request in upstream.requests:
            run.requests.append(
                {
                    "index": request.index,
                    "method": request.method,
                    "path": request.path,
                    "outcome": request.outcome,
                    "answered_with": responder.labels.get(request.index, request.answered_with),
                    "tool_results": tool_results(request),
                    "body": request.body,
                }
            )
    run.finished = agent.finished(run.stdout)
    (dirs.root / "stdout.txt").write_text(run.stdout, encoding="utf-8")
    (dirs.root / "stderr.txt").write_text(run.stderr, encoding="utf-8")
    with (dirs.root / "requests.jsonl").open("w", encoding="utf-8") as handle:
        for request in run.requests:
            handle.write(json.dumps(request, ensure_ascii=False) + "\n")
    return run


# --------------------------------------------------------------------------- judging


@dataclass(frozen=True)
class Problem:
    check: str  # a short name a known failure can refer to
    message: str


def completion_problems(run: Run) -> list[Problem]:
    problems = []
    if run.timed_out:
        message = f"the client did not finish within the time limit ({run.seconds:.0f} s)"
        problems.append(Problem("exit", message))
    elif run.returncode != 0:
        problems.append(Problem("exit", f"the client exited with {run.returncode}"))
    if run.finished.error:
        message = f"the client reported an error: {run.finished.error[:600]}"
        problems.append(Problem("exit", message))
    expected = run.scenario.expected_output(rescued=run.mode == "rescue")
    if expected not in run.finished.output:
        message = f"the client's answer lacks {expected!r}; it is {run.finished.output[:300]!r}"
        problems.append(Problem("answer", message))
    if run.scenario.fail_first:
        labels = [request["answered_with"] for request in run.requests]
        failed = [i for i, label in enumerate(labels) if label.startswith(run.scenario.name + ":")]
        if not failed or run.scenario.name not in labels[failed[0] :]:
            message = f"the model's error was not followed by a retry (answers: {labels})"
            problems.append(Problem("retry", message))
    wanted = run.scenario.tool_result_contains
    if wanted and not any(wanted in r for q in run.requests for r in q["tool_results"]):
        message = f"no tool result containing {wanted!r} reached the model"
        problems.append(Problem("tool", message))
    return problems


def framing_problems(run: Run) -> list[Problem]:
    """Response heads a strict HTTP client may refuse: a field that frames or dates the
    response said twice, or a length together with chunked framing (RFC 9112 6.3)."""
    problems = []
    for exchange in run.exchanges:
        for head in exchange.response_heads():
            names = [name for name, _ in head]
            twice = [
                n for n in ("content-length", "date", "transfer-encoding") if names.count(n) > 1
            ]
            both = "content-length" in names and "transfer-encoding" in names
            if twice or both:
                what = ", ".join(exchange.request_lines())
                said = (
                    f"{', '.join(twice)} twice"
                    if twice
                    else "content-length with transfer-encoding"
                )
                problems.append(Problem("framing", f"response to {what}: {said}: {head}"))
    return problems


def judge(run: Run, direct: Run | None) -> list[Problem]:
    """What is wrong with a run; empty when it is as it should be."""
    problems = completion_problems(run)
    scenario = run.scenario
    if run.mode == "direct":
        calls = scenario_calls(run)
        if scenario.tool_loop and len(calls) < TOOL_LOOP_CALLS:
            message = (
                f"the client stopped the repeated call by itself after {len(calls)} of "
                f"{TOOL_LOOP_CALLS}, so the guard's stop proves nothing for this client"
            )
            problems.append(Problem("direct-loop", message))
        if scenario.loop_unit and not run.loop_copies_seen():
            message = (
                "the loop is nowhere in the direct run's output or files, so the rescue run's "
                "no-loop check proves nothing for this client"
            )
            problems.append(Problem("direct-loop", message))
        return problems
    problems += framing_problems(run)
    if scenario.tool_loop:
        return problems + tool_loop_problems(run, direct)
    kinds = [record.get("kind") for record in run.audit]
    looping = bool(scenario.loop_unit)
    same_as_direct = run.mode == "observe" or not looping
    if same_as_direct and direct is not None and run.finished.output != direct.finished.output:
        message = (
            "the answer differs from the direct run's:\n"
            f"      direct: {direct.finished.output[:400]!r}\n"
            f"      {run.mode}: {run.finished.output[:400]!r}"
        )
        problems.append(Problem("same-as-direct", message))
    if looping and "detection" not in kinds:
        message = f"the proxy's audit log has no detection (kinds: {kinds})"
        problems.append(Problem("detection", message))
    if not looping and kinds:
        message = f"the proxy acted on a scenario with no loop (audit kinds: {kinds})"
        problems.append(Problem("false-detection", message))
    if run.mode == "rescue" and looping:
        if "resume" not in kinds:
            message = f"the proxy did not resume after a cut (audit kinds: {kinds})"
            problems.append(Problem("resume", message))
        seen = run.loop_copies_seen()
        if seen:
            message = f"loop text reached the client: two copies in a row in {seen}"
            problems.append(Problem("loop-leak", message))
    return problems


def scenario_calls(run: Run) -> list[dict]:
    """The upstream requests the scenario's model answered with its repeated tool call."""
    label = f"{run.scenario.name}:call"
    return [request for request in run.requests if request["answered_with"] == label]


def tool_loop_problems(run: Run, direct: Run | None) -> list[Problem]:
    """The tool-loop scenario through the proxy: observe only records the loop; rescue
    steers the model once, then answers the client itself with the stop note."""
    problems = []
    outcomes = [r.get("outcome") for r in run.audit if r.get("kind") == "tool_loop"]
    others = sorted({str(r.get("kind")) for r in run.audit if r.get("kind") != "tool_loop"})
    if others:
        problems.append(Problem("false-detection", f"the proxy acted on text: {others}"))
    if run.mode == "observe":
        if direct is not None and run.finished.output != direct.finished.output:
            message = (
                f"the answer differs from the direct run's: {direct.finished.output[:200]!r} "
                f"vs {run.finished.output[:200]!r}"
            )
            problems.append(Problem("same-as-direct", message))
        if not outcomes or set(outcomes) != {"tool-loop-observed"}:
            message = f"observe should record the loop and nothing else (outcomes: {outcomes})"
            problems.append(Problem("guard", message))
        return problems
    guard = LoopRescueConfig().toolGuard
    wanted = guard.repeatCalls + guard.steerRequests
    calls = scenario_calls(run)
    if len(calls) != wanted:
        message = (
            f"the model got {len(calls)} requests of the loop; the guard lets "
            f"{guard.repeatCalls} repeats and {guard.steerRequests} steered one through"
        )
        problems.append(Problem("guard", message))
    steered = [c for c in calls if PROXY_TAG in json.dumps(c["body"], ensure_ascii=False)]
    if len(steered) != guard.steerRequests:
        message = f"{len(steered)} of the loop's requests carried the steering note"
        problems.append(Problem("guard", message))
    if "tool-loop-steered" not in outcomes or "tool-loop-stopped" not in outcomes:
        message = f"the audit log lacks a steer and a stop (outcomes: {outcomes})"
        problems.append(Problem("guard", message))
    return problems


def failure_details(run: Run) -> list[str]:
    """The evidence for a failed run: the client's error output, the exchanges that failed."""
    lines = [f"    run folder: {run.dirs.root}"]
    if run.stderr.strip():
        tail = run.stderr.strip()[-1200:].replace("\n", "\n      ")
        lines.append(f"    client stderr (tail):\n      {tail}")
    if run.finished.output and run.mode != "rescue":
        lines.append(f"    client answer: {run.finished.output[:300]!r}")
    for exchange in run.exchanges:
        statuses = exchange.statuses()
        failed = any(status >= 400 for status in statuses) or not statuses
        if failed or exchange is run.exchanges[-1]:
            what = ", ".join(exchange.request_lines()) or "(no request line)"
            lines.append(f"    wire #{exchange.number}: {what} -> {statuses or 'no response'}")
            body = exchange.response[-700:].decode(errors="replace").replace("\r", "")
            lines.append("      response tail: " + body.replace("\n", "\n      "))
    for request in run.requests:
        lines.append(
            f"    upstream #{request['index']}: {request['method']} {request['path']} "
            f"answered {request['answered_with']} -> {request['outcome']}"
        )
    errors = [line for line in run.proxy_log.splitlines() if "rror" in line or "Trace" in line]
    if errors:
        lines.append("    proxy log: " + "\n      ".join(errors[-8:]))
    return lines


# --------------------------------------------------------------------------- the matrix


@dataclass
class Verdict:
    run: Run
    problems: list[Problem]

    @property
    def known(self) -> list[Known]:
        return [known for known in KNOWN_FAILURES if known.covers(self.run)]

    def is_known(self, problem: Problem) -> bool:
        return any(problem.check in known.checks or "*" in known.checks for known in self.known)

    @property
    def unexpected(self) -> list[Problem]:
        return [problem for problem in self.problems if not self.is_known(problem)]

    @property
    def fixed(self) -> list[str]:
        """Checks listed as failing that passed ("*": the run fails no check at all)."""
        failed = {problem.check for problem in self.problems}
        return [
            check
            for known in self.known
            for check in known.checks
            if check not in failed and (check != "*" or not failed)
        ]

    @property
    def status(self) -> str:
        if self.unexpected:
            return "FAIL"
        if self.fixed:
            return "FIXED?"
        return "known" if self.problems else "ok"

    @property
    def expected(self) -> bool:
        return self.status in ("ok", "known")


def enter_network_namespace(argv: list[str]) -> int:
    """Runs this command again inside a new network namespace (only loopback, brought up)."""
    command = [sys.executable, "-m", "e2e.clients", *argv, "--in-netns"]
    script = 'ip link set lo up && exec "$@"'
    return subprocess.call(["unshare", "--net", "--", "sh", "-c", script, "sh", *command])


def check_isolated() -> None:
    links = subprocess.run(["ip", "-o", "link", "show", "up"], capture_output=True, text=True)
    names = [line.split(":")[1].strip() for line in links.stdout.splitlines() if ":" in line]
    if names != ["lo"]:
        raise SystemExit(f"expected only the loopback interface up, found {names}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="python -m e2e.clients", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--clients", default=",".join(AGENTS), help="comma-separated")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated")
    parser.add_argument("--modes", default=",".join(MODES), help="proxy modes, comma-separated")
    parser.add_argument("--timeout", type=float, default=180, help="seconds per client run")
    parser.add_argument("--out", type=Path, default=None, help="runs folder")
    parser.add_argument("--in-netns", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    clients = [c for c in args.clients.split(",") if c]
    scenarios = [s for s in args.scenarios.split(",") if s]
    modes = [m for m in args.modes.split(",") if m]
    for name, known in (("client", AGENTS), ("scenario", SCENARIOS)):
        chosen = clients if name == "client" else scenarios
        unknown = [c for c in chosen if c not in known]
        if unknown:
            parser.error(f"unknown {name} {unknown}; known: {', '.join(known)}")
    if any(m not in MODES for m in modes):
        parser.error(f"modes are {', '.join(MODES)}")

    if not args.in_netns:
        ensure_installed(clients)
        if "opencode" in clients and shutil.which("rg") is None:
            raise SystemExit("opencode's glob tool needs rg on PATH: apt-get install -y ripgrep")
        if os.geteuid() != 0:
            # no run without isolation: a client could reach past 127.0.0.1
            raise SystemExit("the clients run in a network namespace (unshare --net): run as root")
        if args.out is None:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            argv += ["--out", str(CLIENTS_DIR / "runs" / stamp)]
        return enter_network_namespace(argv)
    check_isolated()
    out = args.out or CLIENTS_DIR / "runs" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out.mkdir(parents=True, exist_ok=True)
    print(f"runs in {out}; the proxy is the {proxy_build()} build", flush=True)

    verdicts: list[Verdict] = []
    for client in clients:
        agent = AGENTS[client]
        for name in scenarios:
            scenario = SCENARIOS[name]
            if client not in scenario.clients:
                continue
            direct = run_client(agent, scenario, "direct", out, args.timeout)
            verdicts.append(report(direct, judge(direct, None)))
            for mode in modes:
                run = run_client(agent, scenario, mode, out, args.timeout)
                verdicts.append(report(run, judge(run, direct)))
    summary = summarize(verdicts)
    (out / "report.txt").write_text(summary, encoding="utf-8")
    print(summary, flush=True)
    return 0 if all(v.expected for v in verdicts) else 1


def report(run: Run, problems: list[Problem]) -> Verdict:
    verdict = Verdict(run, problems)
    print(f"{verdict.status:>6}  {run.label}  ({run.seconds:.1f} s)", flush=True)
    return verdict


def summarize(verdicts: list[Verdict]) -> str:
    modes = ["direct", *MODES]
    rows = {}
    for verdict in verdicts:
        key = (verdict.run.client, verdict.run.scenario.name)
        rows.setdefault(key, {})[verdict.run.mode] = verdict.status
    lines = ["", f"{'client':<9} {'scenario':<18} " + " ".join(f"{m:<8}" for m in modes).rstrip()]
    for (client, scenario), cells in rows.items():
        line = f"{client:<9} {scenario:<18} " + " ".join(f"{cells.get(m, '-'):<8}" for m in modes)
        lines.append(line.rstrip())
    counts: dict[str, int] = {}
    for verdict in verdicts:
        counts[verdict.status] = counts.get(verdict.status, 0) + 1
    lines.append("")
    lines.append("summary: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    for verdict in verdicts:
        if verdict.status == "ok":
            continue
        lines.append("")
        lines.append(f"{verdict.status}: {verdict.run.label}")
        for known in verdict.known:
            lines.append(f"  known ({', '.join(known.checks)}): {known.reason}")
        if verdict.fixed:
            lines.append(
                f"  passes now: {', '.join(verdict.fixed)}; take it off KNOWN_FAILURES in "
                "e2e/clients/run.py"
            )
        for problem in verdict.problems:
            known = " (known)" if verdict.is_known(problem) else ""
            lines.append(f"  - [{problem.check}]{known} {problem.message}")
        if verdict.problems:
            lines.extend(failure_details(verdict.run))
    return "\n".join(lines) + "\n"
