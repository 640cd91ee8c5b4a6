"""A builder of realistic DSH v4 session events for the doctor's tests (and tests of it).

The builder writes events the way DSH 0.2.1 does (FORMAT.md §6): the tests below check that
the real session reader accepts what it writes, so synthetic logs stay honest.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import orjson

from looprescue.dsh import open_log
from looprescue.dsh.frames import compress_frame

SURFACE_TYPES = {"system/message", "user/message", "assistant/message", "tool/result"}


class SessionBuilder:
    """Appends events with contiguous seqs; each helper returns the seqs it wrote."""

    def __init__(self, session_id: str = "session-00000000-0000-4000-8000-000000000001") -> None:
        self.header: dict[str, Any] = {
            "type": "session",
            "version": 4,
            "id": session_id,
            "createdAt": 1795982600000,
            "cwd": "/home/ana/proj",
            "isSeeded": False,
            "delegationDepth": 0,
        }
        self.events: list[dict[str, Any]] = []
        self.turn = 0
        self.step = 0
        self._ids = itertools.count(1)

    # -- raw ---------------------------------------------------------------------------------

    def add(self, event_type: str, data: dict[str, Any], **envelope: Any) -> int:
        seq = len(self.events)
        event: dict[str, Any] = {
            "type": event_type,
            "seq": seq,
            "time": 1795982600000 + seq,
            "data": data,
        }
        event.update(envelope)
        if event_type in SURFACE_TYPES and "surfaceOp" not in event:
            event["surfaceOp"] = "append"
        self.events.append(event)
        return seq

    def _id(self) -> str:
        return f"00000000-0000-4000-8000-{next(self._ids):012d}"

    # -- turns and steps ---------------------------------------------------------------------

    def start_turn(self) -> int:
        self.turn += 1
        self.step = 0
        return self.add("turn/start", {"turn": self.turn})

    def end_turn(self, kind: str = "completed") -> int:
        if self.step:
            self.add("step/end", {"turn": self.turn, "step": self.step})
        return self.add("turn/end", {"turn": self.turn, "reason": {"kind": kind}})

    def next_step(self) -> int:
        if self.step:
            self.add("step/end", {"turn": self.turn, "step": self.step})
        self.step += 1
        return self.add("step/start", {"turn": self.turn, "step": self.step})

    # -- messages ----------------------------------------------------------------------------

    def user(self, text: str, kind: str = "user") -> int:
        message = {
            "content": [{"type": "text", "text": text}],
            "source": {"kind": kind},
            "role": "user",
            "id": self._id(),
        }
        return self.add("user/message", message)

    def system(self, text: str) -> int:
        message = {
            "role": "system",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "system-prompt"},
            "id": self._id(),
        }
        return self.add(
            "system/message", {"turn": self.turn, "step": self.step, "message": message}
        )

    def request_header(self, tool_count: int, reason: str = "initial") -> int:
        tools = [
            {"name": f"tool{i}", "description": "d" * 40, "parameters": {"type": "object"}}
            for i in range(tool_count)
        ]
        header = {"config": {"provider": "p", "model": "m"}, "tools": tools}
        return self.add("request/header", {"header": header, "reason": reason})

    def assistant(self, text: str = "", tool_calls: list[tuple[str, str, str]] = ()) -> int:
        content: list[dict[str, Any]] = [{"type": "reasoning", "text": "thinking"}]
        if text:
            content.append({"type": "text", "text": text})
        for call_id, name, arguments in tool_calls:
            content.append(
                {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}
            )
        message = {
            "role": "assistant",
            "content": content,
            "source": {"kind": "model", "provider": "p", "model": "m"},
            "id": self._id(),
        }
        return self.add(
            "assistant/message",
            {"turn": self.turn, "step": self.step, "message": message, "stream": []},
        )

    # -- tools ---------------------------------------------------------------------------------

    def tool(
        self,
        name: str,
        arguments: dict[str, Any] | str,
        result: str = "ok",
        *,
        is_error: bool = False,
        error_code: str | None = None,
        text: str = "",
    ) -> tuple[int, int]:
        """One step's model message calling one tool, the call and its result."""
        call_id = f"toolu_{len(self.events):04d}_{next(self._ids):016x}"
        raw = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
        self.assistant(text, [(call_id, name, raw)])
        call_seq = self.add(
            "tool/call",
            {
                "turn": self.turn,
                "step": self.step,
                "callId": call_id,
                "name": name,
                "arguments": raw,
            },
        )
        data: dict[str, Any] = {
            "turn": self.turn,
            "step": self.step,
            "message": {
                "role": "tool",
                "source": {"kind": "tool", "callId": call_id},
                "toolCallId": call_id,
                "content": [{"type": "text", "text": result}],
                "isError": is_error or error_code is not None,
                "id": self._id(),
            },
        }
        if error_code is not None:
            data["error"] = {"name": "ToolError", "code": error_code}
        result_seq = self.add("tool/result", data, sourceEventSeqs=[call_seq])
        return call_seq, result_seq

    # -- failures and context ------------------------------------------------------------------

    def retry(self, code: str = "SERVER") -> tuple[int, int]:
        failure = {"message": "fake failure", "code": code, "status": 500}
        finish = {"type": "finish", "reason": {"kind": "error", "failure": failure}}
        attempt = self.add(
            "assistant/attempt",
            {
                "turn": self.turn,
                "step": self.step,
                "stream": [{"type": "chunk", "time": 1795982600000, "chunk": finish}],
            },
        )
        retry_id = self._id()
        retry = self.add(
            "llm/retry",
            {
                "retryId": retry_id,
                "turn": self.turn,
                "step": self.step,
                "provider": "p",
                "mode": "normal",
                "policyKey": "[]",
                "retry": 1,
                "maxRetries": 5,
                "delayMs": 500,
                "failure": failure,
            },
        )
        self.add(
            "llm/retry-started",
            {"retryId": retry_id, "turn": self.turn, "step": self.step, "retry": 1},
        )
        return attempt, retry

    def compaction(self, failed: bool = False) -> int:
        compaction_id = self._id()
        start = self.add("compaction/start", {"compactionId": compaction_id, "turn": self.turn})
        end: dict[str, Any] = {"compactionId": compaction_id, "turn": self.turn}
        if failed:
            end["error"] = "summary is not smaller than the shadowed content"
        self.add("compaction/end", end)
        return start

    # -- files ---------------------------------------------------------------------------------

    def lines(self) -> list[bytes]:
        return [orjson.dumps(self.header) + b"\n"] + [orjson.dumps(e) + b"\n" for e in self.events]

    def write_plain(self, path: Path) -> Path:
        path.write_bytes(b"".join(self.lines()))
        return path

    def write_zstd(self, path: Path, batch: int = 3) -> Path:
        """Header frame, then one frame per ``batch`` event lines, like DSH's appends."""
        lines = self.lines()
        frames = [compress_frame(lines[0])]
        body = lines[1:]
        frames += [
            compress_frame(b"".join(body[i : i + batch])) for i in range(0, len(body), batch)
        ]
        path.write_bytes(b"".join(frames))
        return path


def a_busy_session() -> SessionBuilder:
    """A session touching every event the doctor reads."""
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    log.system("You are an agent.")
    log.user("Do the task.")
    log.user("Current runtime context.", kind="runtime-context")
    log.request_header(3)
    log.retry()
    log.tool("read", {"file_path": "a.txt"}, "Error: missing", error_code="FS_NOT_FOUND")
    log.next_step()
    log.tool("bash", {"command": "ls", "description": "list"}, "a.txt\n")
    log.next_step()
    log.assistant("Done.")
    log.end_turn()
    log.start_turn()
    log.compaction()
    log.next_step()
    log.user("Again.")
    log.tool("read", {"file_path": "a.txt"}, "Error: missing", error_code="FS_NOT_FOUND")
    log.end_turn()
    return log


def test_real_reader_accepts_plain_and_zstd_builds(tmp_path: Path) -> None:
    log = a_busy_session()
    for path in (
        log.write_plain(tmp_path / "session.v4.jsonl"),
        log.write_zstd(tmp_path / "session.v4.jsonl.zstd"),
    ):
        opened = open_log(path)
        assert opened.header["id"] == log.header["id"]
        assert list(opened.events()) == log.events


def test_seqs_are_contiguous_and_results_cite_their_calls() -> None:
    log = a_busy_session()
    assert [e["seq"] for e in log.events] == list(range(len(log.events)))
    calls = {e["data"]["callId"]: e["seq"] for e in log.events if e["type"] == "tool/call"}
    for event in log.events:
        if event["type"] == "tool/result":
            call_id = event["data"]["message"]["toolCallId"]
            assert event["sourceEventSeqs"] == [calls[call_id]]
