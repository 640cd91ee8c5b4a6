"""The tool-loop guard's judgement, request by request, on both protocols' histories
(docs/rescue.md, "Tool-loop guard"): healthy agent work is never steered or stopped, loops
are steered at their threshold and stopped when they go on."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from tests.test_doctor_helpers import SessionBuilder

from looprescue.config import DoctorConfig, LoopRescueConfig, ToolGuardConfig
from looprescue.doctor import analyze_log
from looprescue.guard import ToolGuard
from looprescue.guard.history import HUMAN_TURN, ToolStep, anthropic_tool_history
from looprescue.wire.anthropic import AnthropicWire
from looprescue.wire.openai import OpenAIWire

Step = tuple[str, Any, str, bool]  # tool, arguments, result, failed


def ok(tool: str, arguments: Any, result: str) -> Step:
    return (tool, arguments, result, False)


def failed(tool: str, arguments: Any, result: str) -> Step:
    return (tool, arguments, result, True)


def anthropic_body(steps: Sequence[Step | str]) -> dict[str, Any]:
    """A Messages request: a prompt, then each step as a tool_use answered by a tool_result;
    a string is a person's message."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Do the task."}]
    for number, step in enumerate(steps):
        if isinstance(step, str):
            messages.append({"role": "assistant", "content": [{"type": "text", "text": "Ok."}]})
            messages.append({"role": "user", "content": step})
            continue
        tool, arguments, result, is_error = step
        call_id = f"toolu_{number:04d}"
        block = {"type": "tool_use", "id": call_id, "name": tool, "input": arguments}
        messages.append({"role": "assistant", "content": [block]})
        answer = {"type": "tool_result", "tool_use_id": call_id, "is_error": is_error}
        answer["content"] = [{"type": "text", "text": result}]
        messages.append({"role": "user", "content": [answer]})
    return {"model": "m", "max_tokens": 256, "messages": messages}


def openai_body(steps: Sequence[Step | str]) -> dict[str, Any]:
    """A Chat Completions request of the same steps (a failure reads as an error report)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Do the task."}]
    for number, step in enumerate(steps):
        if isinstance(step, str):
            messages.append({"role": "assistant", "content": "Ok."})
            messages.append({"role": "user", "content": step})
            continue
        tool, arguments, result, is_error = step
        call_id = f"call_{number:04d}"
        function = {"name": tool, "arguments": json.dumps(arguments)}
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": function}],
            }
        )
        content = f"Error: {result}" if is_error else result
        messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
    return {"model": "m", "messages": messages}


PROTOCOLS = [(AnthropicWire, anthropic_body), (OpenAIWire, openai_body)]


def rungs(
    steps: Sequence[Step | str], protocol: Any = PROTOCOLS[0], **guard: Any
) -> list[str | None]:
    """What the guard does with each request of an agent that made these steps: the request
    after step i carries steps[: i + 1]."""
    wire_class, body_of = protocol
    config = LoopRescueConfig(toolGuard=ToolGuardConfig(**guard))
    judge = ToolGuard(config)
    out = []
    for end in range(1, len(steps) + 1):
        body = body_of(steps[:end])
        verdict = judge.judge(wire_class(body), body)
        out.append(None if verdict is None else verdict.rung)
    return out


LS = ok("bash", {"command": "ls"}, "a.txt\nb.txt\nsrc\n")


# --------------------------------------------------------------------------- healthy work


def polling_a_job() -> list[Step | str]:
    progress = ["queued", "running 5%", "running 5%", "running 5%", "running 40%"]
    progress += ["running 40%", "running 80%", "running 95%", "done: 120 rows"]
    return [
        ok("job_status", {"id": "j1"}, f"[2026-12-03T17:{10 + i}:00Z] {state} (took {i}.2s)")
        for i, state in enumerate(progress)
    ]


def paging_a_file() -> list[Step | str]:
    return [
        ok("read", {"path": "big.log", "offset": page * 200, "limit": 200}, f"lines of page {page}")
        for page in range(25)
    ]


def re_reading_after_edits() -> list[Step | str]:
    steps: list[Step | str] = []
    for version in range(8):
        steps.append(ok("read", {"path": "app.py"}, f"def main():\n    return {version}\n"))
        edit = {"path": "app.py", "old": f"return {version}", "new": f"return {version + 1}"}
        steps.append(ok("edit", edit, "Applied 1 edit to app.py"))
    return steps


def one_edit_to_twenty_files() -> list[Step | str]:
    return [
        ok("edit", {"path": f"/tmp/tmpq8x2k1z0/src/mod_{i}.py", "old": "foo", "new": "bar"}, "ok")
        for i in range(20)
    ]


def fixes_each_followed_by_tests() -> list[Step | str]:
    steps: list[Step | str] = []
    for left in range(5, 0, -1):
        steps.append(failed("bash", {"command": "pytest -q"}, f"{left} failed in 2.31s"))
        steps.append(ok("edit", {"path": "lib.py", "fix": left}, "Applied 1 edit"))
    steps.append(ok("bash", {"command": "pytest -q"}, "40 passed in 2.02s"))
    return steps


HEALTHY = {
    "polling a job until it finishes": polling_a_job,
    "paging through a file": paging_a_file,
    "re-reading a file after editing it": re_reading_after_edits,
    "the same edit applied to twenty files": one_edit_to_twenty_files,
    "a test run repeated after each fix": fixes_each_followed_by_tests,
}


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=["anthropic", "openai"])
@pytest.mark.parametrize("work", list(HEALTHY), ids=list(HEALTHY))
def test_healthy_agent_work_is_never_steered_or_stopped(work: str, protocol: Any) -> None:
    steps = HEALTHY[work]()
    assert rungs(steps, protocol) == [None] * len(steps)


# --------------------------------------------------------------------------- loops


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=["anthropic", "openai"])
def test_the_same_call_and_result_is_steered_at_repeat_calls_then_stopped(protocol: Any) -> None:
    assert rungs([LS] * 8, protocol) == [None] * 4 + ["steer", "stop", "stop", "stop"]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=["anthropic", "openai"])
def test_a_cycle_of_calls_with_the_same_results_is_steered_then_stopped(protocol: Any) -> None:
    read = ok("read", {"path": "a.txt"}, "hello")
    make = failed("bash", {"command": "make"}, "make: *** [all] Error 1")
    assert rungs([read, make] * 4, protocol) == [None] * 5 + ["steer", "stop", "stop"]
    cycle3 = [read, LS, ok("bash", {"command": "pwd"}, "/w")] * 3
    assert rungs([*cycle3, read], protocol, cycleRepeats=3)[-2:] == ["steer", "stop"]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=["anthropic", "openai"])
def test_the_same_failing_call_recurring_after_its_error_is_steered_then_stopped(
    protocol: Any,
) -> None:
    missing = failed("read", {"path": "notes.md"}, "ENOENT: no such file: notes.md")
    others = [ok("bash", {"command": f"ls dir{i}"}, f"file{i}") for i in range(6)]
    steps: list[Step | str] = []
    for other in others:
        steps += [missing, other]
    got = rungs(steps, protocol)
    # judged at each failing read: the 4th failure is steered, the 5th stopped
    assert got[0::2] == [None, None, None, "steer", "stop", "stop"]
    assert got[1::2] == [None] * 6  # a different call last: nothing to stop


def test_a_success_of_the_failing_call_answers_its_failures() -> None:
    missing = failed("read", {"path": "notes.md"}, "ENOENT")
    found = ok("read", {"path": "notes.md"}, "# notes")
    other = ok("bash", {"command": "touch x"}, "")
    steps = [missing, other, missing, other, missing, found, missing, other, missing]
    assert rungs(steps) == [None] * len(steps)


def test_a_changed_result_resets_the_count() -> None:
    changed = ok("bash", {"command": "ls"}, "a.txt\nb.txt\nsrc\nnew.txt\n")
    assert rungs([LS] * 4 + [changed] + [LS] * 4) == [None] * 9


def test_a_person_speaking_starts_over() -> None:
    assert rungs([LS] * 4 + ["Try again please."] + [LS] * 4) == [None] * 9


def test_volatile_tokens_and_key_order_do_not_make_calls_differ() -> None:
    steps: list[Step | str] = []
    for i in range(6):
        arguments = (
            {"command": "status", "verbose": True}
            if i % 2
            else {"verbose": True, "command": "status"}
        )
        result = (
            f"\x1b[32mOK\x1b[0m request_id=req_0{i}1CUx7Yq2a9 at 2026-12-03T17:0{i}:00Z "
            f"in {i + 1}.5s, log /tmp/tmpa{i}b2c3d4/out.txt"
        )
        steps.append(ok("svc", arguments, result))
    assert rungs(steps) == [None] * 4 + ["steer", "stop"]


def test_exempt_tools_are_never_a_loop() -> None:
    poll = ok("job_status", {"id": "j1"}, "running")
    assert rungs([poll] * 8, exempt=("job_*",)) == [None] * 8
    assert rungs([poll] * 8, exempt=("other_*",))[4:6] == ["steer", "stop"]


def test_the_ladder_follows_the_rungs_that_are_on() -> None:
    assert rungs([LS] * 7, steer=False) == [None] * 4 + ["stop"] * 3
    assert rungs([LS] * 7, stop=False) == [None] * 4 + ["steer"] * 3
    assert rungs([LS] * 8, steerRequests=2) == [None] * 4 + ["steer", "steer", "stop", "stop"]
    assert rungs([LS] * 7, steer=False, stop=False) == [None] * 4 + ["watch"] * 3
    assert rungs([LS] * 7, repeatCalls=3) == [None] * 2 + ["steer"] + ["stop"] * 4
    assert rungs([LS] * 7, enabled=False) == [None] * 7


def test_observe_mode_only_watches() -> None:
    body = anthropic_body([LS] * 7)
    verdict = ToolGuard(LoopRescueConfig(mode="observe")).judge(AnthropicWire(body), body)
    assert verdict is not None and verdict.rung == "watch"


# --------------------------------------------------------------------------- reading histories


def test_anthropic_history_pairs_calls_with_results_by_id() -> None:
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "two reads"},
                    {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "t2", "name": "read", "input": {"path": "b"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t2", "content": "B"},
                    {"type": "tool_result", "tool_use_id": "t1", "content": "A", "is_error": True},
                    {"type": "text", "text": "a reminder from the harness"},
                ],
            },
        ]
    }
    assert anthropic_tool_history(body) == [
        HUMAN_TURN,
        ToolStep("read", {"path": "b"}, "B", False),
        ToolStep("read", {"path": "a"}, "A", True),
    ]


def test_odd_shapes_are_skipped_not_fatal() -> None:
    junk = {"messages": [None, 3, {"role": "assistant", "content": [1, {"type": "tool_use"}]}]}
    assert anthropic_tool_history(junk) == []
    body = {"messages": [{"role": "assistant", "tool_calls": [None, {"function": 1}]}]}
    assert OpenAIWire(body).tool_history(body) == []


# --------------------------------------------------------------------------- what is written


def test_the_steer_note_names_the_call_in_the_conversations_language() -> None:
    guard = ToolGuard(LoopRescueConfig())
    body = anthropic_body([LS] * 5)
    verdict = guard.judge(AnthropicWire(body), body)
    assert verdict is not None
    steered = guard.steered(AnthropicWire(body), body, verdict, "en")
    note = steered["messages"][-1]["content"][-1]["text"]
    assert 'bash {"command":"ls"}' in note and "5 times" in note and "not changed" in note
    assert steered["messages"][:-1] == body["messages"][:-1]  # the client's copy is untouched
    assert body["messages"][-1]["content"][-1]["type"] == "tool_result"
    zh = guard.steered(OpenAIWire(body), openai_body([LS] * 5), verdict, "zh")
    assert (
        zh["messages"][-1]["role"] == "user"
        and "结果也没有任何变化" in zh["messages"][-1]["content"]
    )


def test_an_openai_user_note_right_after_tool_results_is_no_new_turn() -> None:
    # DSH sends its repeat-tool reminder as a user message after the tool messages
    body = openai_body([LS] * 3)
    body["messages"].append({"role": "user", "content": "You are repeating the same call."})
    more = openai_body([LS] * 5)["messages"][-4:]
    body["messages"] += more
    verdict = ToolGuard(LoopRescueConfig()).judge(OpenAIWire(body), body)
    assert verdict is not None and (verdict.loop.count, verdict.rung) == (5, "steer")
    # a user message after the assistant's answer is a person speaking
    assert openai_body([LS, "Again?"])["messages"][-1]["role"] == "user"
    assert rungs([LS] * 4 + ["Again?"] + [LS] * 4, PROTOCOLS[1]) == [None] * 9


# --------------------------------------------------------------------------- what loops cost


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=["anthropic", "openai"])
def test_a_loops_cost_read_from_one_request_is_the_sum_of_its_requests(protocol: Any) -> None:
    wire_class, body_of = protocol
    guard = ToolGuard(LoopRescueConfig(toolGuard=ToolGuardConfig(repeatCalls=2)))
    costs = {}
    for calls in range(2, 8):
        body = body_of([LS] * calls)
        verdict = guard.judge(wire_class(body), body)
        assert verdict is not None
        costs[calls] = verdict.cost
    # the requests that followed the 2nd .. 7th call: the last one read alone knows them all
    assert costs[7].earlier_tokens == sum(costs[n].request_tokens for n in range(2, 7))
    assert costs[2].earlier_tokens == 0
    assert all(costs[n].request_tokens < costs[n + 1].request_tokens for n in range(2, 7))


def test_each_loop_request_is_counted_once_as_spent_or_saved() -> None:
    guard = ToolGuard(LoopRescueConfig())
    verdicts = []
    for calls in range(5, 8):
        body = anthropic_body([LS] * calls)
        verdicts.append(guard.judge(AnthropicWire(body), body))
    steer, stop, again = verdicts
    assert steer is not None and stop is not None and again is not None
    # first judged a loop: the earlier requests and this one were spent
    assert steer.tokens() == (steer.cost.earlier_tokens + steer.cost.request_tokens, 0)
    assert stop.tokens() == (0, stop.cost.request_tokens)
    assert again.tokens() == (0, again.cost.request_tokens)
    record = stop.audit()
    assert record["saved_tokens"] == stop.cost.request_tokens and "saved_dollars" not in record


def test_prices_per_model_glob_give_dollars() -> None:
    prices = {"claude-*": 3.0, "*": 0.5}
    guard = ToolGuard(LoopRescueConfig(toolGuard=ToolGuardConfig(inputPrices=prices)))
    body = {**anthropic_body([LS] * 6), "model": "claude-sonnet"}
    verdict = guard.judge(AnthropicWire(body), body)
    assert verdict is not None and verdict.cost.price == 3.0
    record = verdict.audit()
    assert record["saved_dollars"] == round(record["saved_tokens"] * 3.0 / 1e6, 6) > 0
    other = {**body, "model": "deepseek-chat"}
    assert guard.judge(AnthropicWire(other), other).cost.price == 0.5  # type: ignore[union-attr]


# --------------------------------------------------------------------------- one fold, two views


def session_events(steps: Sequence[Step | str]) -> list[dict[str, Any]]:
    """The same steps as the DSH session log `doctor` reads."""
    log = SessionBuilder()
    log.start_turn()
    log.user("Do the task.")
    for step in steps:
        if isinstance(step, str):
            log.end_turn()
            log.start_turn()
            log.user(step)
            continue
        tool, arguments, result, is_error = step
        log.tool(tool, arguments, result, is_error=is_error)
    log.end_turn()
    return log.events


SAME_THRESHOLDS = DoctorConfig(repeatToolMin=5, toolCycleMinRepeats=3, toolCycleMaxWidth=5)


@pytest.mark.parametrize("work", list(HEALTHY), ids=list(HEALTHY))
def test_doctor_with_the_guards_thresholds_finds_no_loop_in_healthy_work(work: str) -> None:
    signals = analyze_log(session_events(HEALTHY[work]()), options=SAME_THRESHOLDS)
    assert [s for s in signals if s.kind in ("retry-storm", "tool-cycle")] == []


def test_doctor_and_the_guard_measure_a_loop_alike() -> None:
    read = ok("read", {"path": "a.txt"}, "hello")
    make = failed("bash", {"command": "make"}, "make: *** [all] Error 1")
    cases = {
        ("retry-storm", "repeat:bash", "repeat"): [ok("read", {"path": "x"}, "x"), *[LS] * 7],
        ("tool-cycle", "cycle:read>bash", "cycle"): [LS, *[read, make] * 4],
    }
    guard = ToolGuard(LoopRescueConfig())
    for (kind, sub, loop_kind), steps in cases.items():
        (signal,) = [
            s for s in analyze_log(session_events(steps), options=SAME_THRESHOLDS) if s.kind == kind
        ]
        body = anthropic_body(steps)
        verdict = guard.judge(AnthropicWire(body), body)
        assert verdict is not None
        assert (signal.sub, signal.metric) == (sub, verdict.loop.count)
        assert verdict.loop.kind == loop_kind


def test_the_stop_message_says_what_happened_in_the_conversations_language() -> None:
    body = anthropic_body([LS] * 6)
    verdict = ToolGuard(LoopRescueConfig()).judge(AnthropicWire(body), body)
    assert verdict is not None and verdict.rung == "stop"
    zh = ToolGuard(LoopRescueConfig()).stop_text(verdict, "zh")
    assert zh.startswith("[looprescue] 已停止") and "6 次" in zh and "提示" in zh
    unsteered = ToolGuard(LoopRescueConfig(toolGuard=ToolGuardConfig(steer=False)))
    en = unsteered.stop_text(verdict, "en")
    assert "6 times in a row" in en and "note" not in en  # no note was sent before


def test_calls_that_share_one_id_are_still_told_apart() -> None:
    # some servers number each message's calls from zero: every call is "call_0"
    guard = ToolGuard(LoopRescueConfig())
    steps = one_edit_to_twenty_files()
    for end in range(1, len(steps) + 1):
        body = openai_body(steps[:end])
        for message in body["messages"]:
            for call in message.get("tool_calls") or ():
                call["id"] = "call_0"
            if message["role"] == "tool":
                message["tool_call_id"] = "call_0"
        assert guard.judge(OpenAIWire(body), body) is None
