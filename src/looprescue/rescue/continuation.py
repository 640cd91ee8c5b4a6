"""Build the proxy's own upstream requests: continuations after a cut, and request tweaks.

A continuation is the client's original request plus the useful work kept from before the
loop and a short correction (see ``marker.correction``). It is the proxy's request, not the
client's: DSH's once-only extension payloads are stripped from it.

Where the kept work goes, per protocol:

* the visible text already shown to the user becomes a trailing assistant message, so the
  model continues after it instead of restating it;
* the kept reasoning is quoted inside the correction rather than replayed as a thinking block:
  it was cut mid-block, so no provider signature covers it, and a quoted passage is accepted by
  every upstream.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..config import LoopRescueConfig
from . import marker as notes
from .marker import Lang

Protocol = Literal["anthropic", "openai"]

# FORMAT.md §10.4: payloads DSH means to send exactly once per client request.
DSH_ONCE_ONLY_FIELDS = ("dsh_session_log", "dsh_plugin_packages")


@dataclass(frozen=True, slots=True)
class KeptWork:
    """Client-visible content of the response so far (markers excluded)."""

    reasoning: str = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class LoopSummary:
    """What the correction tells the model about the loop."""

    channel: str
    repeated: str
    repeats: float
    chars_removed: int


def strip_dsh_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in DSH_ONCE_ONLY_FIELDS}


def build_continuation(
    protocol: Protocol,
    original: Mapping[str, Any],
    kept: KeptWork,
    loop: LoopSummary,
    lang: Lang,
) -> dict[str, Any]:
    """The continuation request body (retry overrides are applied separately)."""
    body = copy.deepcopy(strip_dsh_fields(original))
    messages = list(body.get("messages") or [])
    kept_text = kept.text.strip() != ""
    correction = notes.correction(
        channel=loop.channel,
        repeated=notes.shorten(loop.repeated),
        repeats=loop.repeats,
        chars_removed=loop.chars_removed,
        kept_reasoning=kept.reasoning.strip(),
        kept_text=kept_text,
        lang=lang,
    )
    if protocol == "anthropic":
        if kept_text:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": kept.text}]})
        _append_anthropic_user_text(messages, correction)
    else:
        if kept_text:
            assistant: dict[str, Any] = {"role": "assistant", "content": kept.text}
            if _uses_reasoning_content(messages):
                # DeepSeek's thinking mode wants reasoning_content on every assistant message.
                assistant["reasoning_content"] = kept.reasoning
            messages.append(assistant)
        messages.append({"role": "user", "content": correction})
    body["messages"] = messages
    return body


def apply_retry_overrides(
    body: Mapping[str, Any], protocol: Protocol, config: LoopRescueConfig
) -> dict[str, Any]:
    """Set the configured retry sampling parameters; unset keys leave the request unchanged."""
    out = dict(body)
    if config.retryTemperature is not None:
        out["temperature"] = config.retryTemperature
    effort = config.retryReasoningEffort
    if protocol == "anthropic":
        thinking = out.get("thinking")
        thinking_off = isinstance(thinking, Mapping) and thinking.get("type") == "disabled"
        if effort is not None and not thinking_off:
            output_config = dict(out.get("output_config") or {})
            output_config["effort"] = effort
            out["output_config"] = output_config
    else:
        if effort is not None:
            out["reasoning_effort"] = effort
        if config.retryFrequencyPenalty is not None:
            out["frequency_penalty"] = config.retryFrequencyPenalty
        if config.retryPresencePenalty is not None:
            out["presence_penalty"] = config.retryPresencePenalty
    return out


def has_retry_overrides(config: LoopRescueConfig) -> bool:
    return any(
        value is not None
        for value in (
            config.retryTemperature,
            config.retryReasoningEffort,
            config.retryFrequencyPenalty,
            config.retryPresencePenalty,
        )
    )


def apply_stall_nudge(body: Mapping[str, Any], protocol: Protocol, lang: Lang) -> dict[str, Any]:
    """Append the stall nudge as user text at the end of the request."""
    out = dict(body)
    messages = copy.deepcopy(list(out.get("messages") or []))
    nudge = notes.stall_nudge(lang)
    if protocol == "anthropic":
        _append_anthropic_user_text(messages, nudge)
    else:
        messages.append({"role": "user", "content": nudge})
    out["messages"] = messages
    return out


def _append_anthropic_user_text(messages: list[Any], text: str) -> None:
    """Add ``text`` as a user text block: to the last message when it is a user turn (the API
    expects alternating roles; DSH itself appends reminders after tool results this way),
    else as a new user message."""
    last = messages[-1] if messages else None
    if isinstance(last, Mapping) and last.get("role") == "user":
        content = last.get("content")
        if isinstance(content, str):
            blocks: list[Any] = [{"type": "text", "text": content}]
        else:
            blocks = list(content or [])
        blocks.append({"type": "text", "text": text})
        messages[-1] = {**last, "content": blocks}
    else:
        messages.append({"role": "user", "content": [{"type": "text", "text": text}]})


def _uses_reasoning_content(messages: list[Any]) -> bool:
    return any(
        isinstance(m, Mapping) and m.get("role") == "assistant" and "reasoning_content" in m
        for m in messages
    )
