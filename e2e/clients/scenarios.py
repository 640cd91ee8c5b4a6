"""What the scripted model answers in each scenario, to whichever client asks.

A client sends more than its agent turns: opencode asks for a title first, Qwen Code asks a
memory-extraction helper after each turn, Claude Code's WebSearch tool makes its own request
with the server tool. So the model is not a queue but a rule: it reads each request and answers
by what the request is. The prompt carries the scenario's tag; the step of a turn is the number
of tool results in the request; a continuation (the proxy's request after a cut, its last user
message carrying the proxy's tag) gets the scenario's continuation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tests.support.scripted_upstream import (
    RecordedRequest,
    ScriptedResponse,
    ToolCall,
    request_text,
)

from looprescue.rescue.marker import TAG as PROXY_TAG

# ASCII without quotes or backslashes: a copy reads the same in plain text and inside the JSON
# a client stores, so a transcript can be searched as raw bytes.
REASONING_UNIT = "Wait, let me check the notes file once more before I answer. "
TEXT_UNIT = "I will read the notes file again to be sure. "
COPIES = 30

# how many times the tool-loop scenario's model asks for the same listing before it answers
TOOL_LOOP_CALLS = 8
TOOL_LOOP_STOP = "Stopped: the agent is stuck in a tool-call loop."

SEARCH_LOOP_UNIT = "The page says loop rescue proxies cut repeated text. "
SIDE_ANSWER = "Scripted side answer."
SEARCH_URL = "https://example.com/loop-rescue"


@dataclass(frozen=True)
class Scenario:
    name: str
    prompt: str
    # what the client's answer must contain, without a rescue and after one ("": as without)
    final: str
    rescued_final: str = ""
    # the repeated unit of a looping scenario ("" for the others), and its channel
    loop_unit: str = ""
    loop_channel: str = ""
    clients: tuple[str, ...] = ("claude", "codex", "opencode", "qwen")
    # what the proxy's continuation gets after a cut
    continuation: ScriptedResponse | None = None
    # which tool result must reach the model: proof that the client ran the tool
    tool_result_contains: str = ""
    # the first request of each step is answered with this HTTP status (0: none), the next
    # one (the client's retry) as usual; with ``in_band``, the first answer streams a few
    # events of the usual answer and then the protocol's error event instead
    fail_first: int = 0
    in_band: bool = False
    # the model asks for the same tool call with the same result again and again (the
    # tool-loop guard's case, across requests rather than inside one answer)
    tool_loop: bool = False
    notes: str = field(default="", compare=False)

    @property
    def search_query(self) -> str:
        # Claude Code's search request quotes the query alone: it names the scenario there
        return f"loop rescue proxy {self.name}"

    def continuation_answer(self, client_tool: tuple[str, Mapping[str, Any]]) -> ScriptedResponse:
        """What the proxy's continuation after a cut gets: the looping step without its loop."""
        if self.continuation is None:
            raise ValueError(f"scenario {self.name} has no loop to continue after")
        if self.name == "loop-then-tool":
            tool, arguments = client_tool
            return replace(self.continuation, tool_calls=(ToolCall(tool, arguments),))
        return self.continuation

    def expected_output(self, rescued: bool) -> str:
        return self.rescued_final if rescued and self.rescued_final else self.final

    @property
    def tag(self) -> str:
        return f"SCENARIO:{self.name}"

    def full_prompt(self) -> str:
        return f"{self.tag} {self.prompt}"

    def _listing(
        self, client_tool: tuple[str, Mapping[str, Any]], reasoning: str
    ) -> ScriptedResponse:
        """The step that calls the client's folder-listing tool."""
        tool, arguments = client_tool
        return ScriptedResponse(
            reasoning=reasoning, tool_calls=(ToolCall(tool, arguments),), label=f"{self.name}:call"
        )

    def steps(self, client_tool: tuple[str, Mapping[str, Any]]) -> list[ScriptedResponse]:
        """The agent turn's answers, by how many tool results the request carries."""
        name = self.name
        if name in ("healthy", "upstream-error", "stream-error"):
            return [
                ScriptedResponse(
                    reasoning="The user wants a short greeting. I can answer directly.",
                    text=self.final,
                    label=name,
                )
            ]
        if name == "loop-reasoning":
            reasoning = "I need to say what the folder holds. " + REASONING_UNIT * COPIES
            return [ScriptedResponse(reasoning=reasoning, text=self.final, label=name)]
        if name == "loop-text":
            text = "Here is what I will do. " + TEXT_UNIT * COPIES
            return [ScriptedResponse(reasoning="Plan the answer.", text=text, label=name)]
        if name == "tool":
            call = self._listing(client_tool, "I should list the text files first.")
            answer = ScriptedResponse(
                reasoning="The listing shows the notes file.", text=self.final, label=name
            )
            return [call, answer]
        if name == "loop-then-tool":
            reasoning = "I should list the text files. " + REASONING_UNIT * COPIES
            call = self._listing(client_tool, reasoning)
            answer = ScriptedResponse(
                reasoning="The listing shows the notes file.", text=self.final, label=name
            )
            return [call, answer]
        if name == "tool-loop":
            # it ignores the guard's steering note: the worst case, so the stop must come
            call = self._listing(client_tool, "I should list the text files again to be sure.")
            answer = ScriptedResponse(text=self.final, label=name)
            return [call] * TOOL_LOOP_CALLS + [answer]
        if name in ("server-tools", "server-tools-loop"):
            call = ScriptedResponse(
                reasoning="I should search the web for this.",
                tool_calls=(ToolCall("WebSearch", {"query": self.search_query}),),
                label=f"{name}:call",
            )
            answer = ScriptedResponse(text=self.final, label=name)
            return [call, answer]
        raise ValueError(f"no steps for scenario {name}")


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "healthy",
            "Say hello in one sentence.",
            final="Hello! The scripted model answers in one sentence.",
        ),
        Scenario(
            "upstream-error",
            "Say hello after a hiccup.",
            final="Hello! The scripted model answers in one sentence.",
            fail_first=503,
        ),
        Scenario(
            "stream-error",
            "Say hello after a broken stream.",
            final="Hello! The scripted model answers in one sentence.",
            fail_first=200,
            in_band=True,
            # Qwen Code 0.15 ends its turn on an in-band error (exit 1), with or without the
            # proxy: it never retries, so there is nothing to compare
            clients=("claude", "codex", "opencode"),
        ),
        Scenario(
            "loop-reasoning",
            "What does this folder hold?",
            final="The folder holds one notes file.",
            loop_unit=REASONING_UNIT,
            loop_channel="reasoning",
            continuation=ScriptedResponse(
                reasoning="The notes file is the only file.",
                text="The folder holds one notes file.",
                label="loop-reasoning:continuation",
            ),
        ),
        Scenario(
            "loop-text",
            "What does the notes file say?",
            final="Here is what I will do. " + TEXT_UNIT * 2,
            rescued_final="The notes file says hello.",
            loop_unit=TEXT_UNIT,
            loop_channel="text",
            continuation=ScriptedResponse(
                text="The notes file says hello.", label="loop-text:continuation"
            ),
        ),
        Scenario(
            "tool",
            "List the text files here.",
            final="There is one text file: notes.txt.",
            tool_result_contains="notes.txt",
        ),
        Scenario(
            "loop-then-tool",
            "Which text files are here?",
            final="There is one text file: notes.txt.",
            loop_unit=REASONING_UNIT,
            loop_channel="reasoning",
            tool_result_contains="notes.txt",
            # the cut comes before the tool call streams: the continuation makes the call
            continuation=ScriptedResponse(
                reasoning="Listing them now.", label="loop-then-tool:continuation"
            ),
        ),
        Scenario(
            "tool-loop",
            "Make sure which text files are here.",
            final=f"I listed the files {TOOL_LOOP_CALLS} times: there is one, notes.txt.",
            rescued_final=TOOL_LOOP_STOP,
            tool_result_contains="notes.txt",
            tool_loop=True,
        ),
        Scenario(
            "server-tools",
            "Search the web for loop rescue proxies.",
            final=f"One page came up: {SEARCH_URL}",
            clients=("claude",),
            tool_result_contains=SEARCH_URL,
        ),
        Scenario(
            "server-tools-loop",
            "Search the web for loop rescue proxies, in detail.",
            final=f"One page came up: {SEARCH_URL}",
            clients=("claude",),
            loop_unit=SEARCH_LOOP_UNIT,
            loop_channel="text",
            tool_result_contains=SEARCH_URL,
        ),
    )
}


def web_search_answer(request: RecordedRequest) -> ScriptedResponse:
    """The server tool's turn, as the Messages API answers it: the search call the model made,
    its results, then text about them (that says one sentence over and over when ``looping``)."""
    tool_id = f"srvtoolu_scripted_{request.index}"
    text = f"Loop rescue proxies cut repeated text. Source: {SEARCH_URL}"
    looping = SCENARIOS["server-tools-loop"].search_query in request_text(_messages(request))
    if looping:
        text = "Here is what the search found. " + SEARCH_LOOP_UNIT * COPIES
    return ScriptedResponse(
        server_blocks=(
            {
                "type": "server_tool_use",
                "id": tool_id,
                "name": "web_search",
                "input": {"query": "loop rescue proxy"},  # what the model searched for
            },
            {
                "type": "web_search_tool_result",
                "tool_use_id": tool_id,
                "content": [
                    {
                        "type": "web_search_result",
                        "title": "Loop rescue",
                        "url": SEARCH_URL,
                        "encrypted_content": "scripted-encrypted-content",
                        "page_age": None,
                    }
                ],
            },
        ),
        text=text,
        label="web-search:loop" if looping else "web-search",
    )


# --------------------------------------------------------------------------- reading a request


def _messages(request: RecordedRequest) -> list[Any]:
    body = request.body if isinstance(request.body, Mapping) else {}
    items = body.get("input") if request.protocol == "responses" else body.get("messages")
    if isinstance(items, str):  # the Responses API's short form of one user message
        return [{"role": "user", "content": items}]
    return items if isinstance(items, list) else []


def tool_results(request: RecordedRequest) -> list[str]:
    """The text of every tool result in a request's history, in order."""
    found: list[str] = []
    for message in _messages(request):
        if not isinstance(message, Mapping):
            continue
        if message.get("role") == "tool":  # Chat Completions
            found.append(request_text(message.get("content")))
        elif message.get("type") in ("function_call_output", "custom_tool_call_output"):
            found.append(request_text(message.get("output")))
        elif isinstance(message.get("content"), list):  # Messages: blocks in a user turn
            for block in message["content"]:
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    found.append(request_text(block.get("content")))
    return found


def last_user_text(request: RecordedRequest) -> str:
    for message in reversed(_messages(request)):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return request_text(message.get("content"))
    return ""


def is_continuation(request: RecordedRequest) -> bool:
    return PROXY_TAG in last_user_text(request)


def side_request(request: RecordedRequest) -> str | None:
    """What a request that is not the agent's turn is for, or None for an agent turn."""
    body = request.body if isinstance(request.body, Mapping) else {}
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    if (
        any(
            isinstance(t, Mapping) and str(t.get("type", "")).startswith("web_search_")
            for t in tools
        )
        and request.protocol == "anthropic"
    ):
        return "web-search"
    text = request_text(body.get("messages") or body.get("input"))
    if not tools and "Generate a title" in text:  # opencode
        return "title"
    if "managed memory" in text:  # Qwen Code's memory extraction after a turn
        return "memory"
    return None


_TAG = re.compile(r"SCENARIO:([\w-]+)")


def scenario_of(request: RecordedRequest) -> Scenario | None:
    match = _TAG.search(request_text(_messages(request)))
    return SCENARIOS.get(match.group(1)) if match else None


class Responder:
    """The scripted model for one client: a ``ScriptedUpstream`` rule that answers any request."""

    def __init__(self, client_tool: tuple[str, Mapping[str, Any]]) -> None:
        self.client_tool = client_tool
        self.labels: dict[int, str] = {}  # request index -> what it was answered with
        self.failed: set[int] = set()  # steps already answered with the scenario's error

    def __call__(self, request: RecordedRequest) -> ScriptedResponse:
        response = self._answer(request)
        self.labels[request.index] = response.label
        return response

    def _answer(self, request: RecordedRequest) -> ScriptedResponse:
        side = side_request(request)
        if side == "web-search":
            if is_continuation(request):
                return ScriptedResponse(
                    text=f"Source: {SEARCH_URL}", label="web-search:continuation"
                )
            return web_search_answer(request)
        scenario = scenario_of(request)
        if side is not None or scenario is None:
            return ScriptedResponse(text=SIDE_ANSWER, label=side or "untagged")
        if is_continuation(request) and scenario.continuation is not None:
            return scenario.continuation_answer(self.client_tool)
        steps = scenario.steps(self.client_tool)
        step = min(len(tool_results(request)), len(steps) - 1)
        if scenario.fail_first and step not in self.failed:
            self.failed.add(step)
            if scenario.in_band:
                return replace(steps[step], error_event_after=6, label=f"{scenario.name}:error")
            # Retry-After 0: clients that honour it retry at once
            status = scenario.fail_first
            return ScriptedResponse(status=status, retry_after=0, label=f"{scenario.name}:{status}")
        return steps[step]
