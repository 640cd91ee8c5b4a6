"""The proxy's own upstream requests: continuations after a cut, and request tweaks.

A continuation is the client's original request plus the useful work kept from before the
loop and a short correction (see ``marker.correction``). It is the proxy's request, not the
client's: DSH's once-only extension payloads are stripped from it.

Where the kept work goes:

* the visible text already shown to the user becomes a trailing assistant message, so the
  model continues after it instead of restating it;
* the kept reasoning (cut where the loop began: nothing of the loop goes back upstream) is
  quoted inside the correction rather than replayed as a thinking block: it was cut mid-block,
  so no provider signature covers it, and a quoted passage is accepted by every upstream.

How a message is added to a request differs per protocol; that lives in the protocol's wire
object (:class:`RequestEditor`), this module only decides what to add.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..config import LoopRescueConfig
from . import marker as notes
from .conversation import uses_tools
from .marker import Lang
from .sanitize import HistoryCut, HistoryPruner

# FORMAT.md §10.4: payloads DSH means to send exactly once per client request.
DSH_ONCE_ONLY_FIELDS = ("dsh_session_log", "dsh_plugin_packages")
PHRASE_LIMIT = 40
# A sentence as the detector cuts them: up to a CJK full stop, a line end, or .!? before a space.
_FIRST_SENTENCE = re.compile(r"[^。！？\n]*?(?:[。！？]|[.!?](?=\s)|(?=\n))", re.S)


@dataclass(frozen=True, slots=True)
class KeptWork:
    """Content of the response so far that may go back upstream (markers excluded)."""

    reasoning: str = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class LoopSummary:
    """The loop as a resume knows it: the correction names its channel, and the resume's audit
    record quotes its first phrase (the correction itself quotes nothing of it)."""

    channel: str
    phrase: str  # <= PHRASE_LIMIT chars: how the repeated unit starts


class RequestEditor(Protocol):
    """How one protocol adds messages to a request body and prunes its history (implemented by
    its wire object).

    Each method returns a new body and leaves ``body`` unchanged."""

    def with_user_text(self, body: Mapping[str, Any], text: str) -> dict[str, Any]: ...

    def with_assistant_text(self, body: Mapping[str, Any], kept: KeptWork) -> dict[str, Any]: ...

    def with_retry_overrides(
        self, body: Mapping[str, Any], config: LoopRescueConfig
    ) -> Mapping[str, Any]: ...

    def with_lighter_reasoning(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The request with less reasoning: effort low where it sets an effort, thinking off
        where its only switch is on/off; unchanged where it asks for no reasoning setting."""
        ...

    def output_budget(self, body: Mapping[str, Any]) -> int | None:
        """The most output tokens the request allows (None: no limit set)."""
        ...

    def with_output_budget(self, body: Mapping[str, Any], tokens: int) -> dict[str, Any]: ...

    def prune_history(
        self, body: Mapping[str, Any], pruner: HistoryPruner
    ) -> tuple[dict[str, Any] | None, list[HistoryCut]]: ...


def strip_dsh_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in DSH_ONCE_ONLY_FIELDS}


def summarize_loop(*, channel: str, channel_text: str, loop_start: int) -> LoopSummary:
    """The loop's channel and its first phrase: the loop's first sentence (or its start), one
    phrase, never a run of the loop."""
    head = channel_text[loop_start : loop_start + 4 * PHRASE_LIMIT].lstrip()
    first = _FIRST_SENTENCE.match(head)
    if first is not None:
        head = first.group()
    return LoopSummary(channel=channel, phrase=notes.shorten(head, PHRASE_LIMIT))


def correction_inputs(original: Mapping[str, Any], kept: KeptWork) -> tuple[bool, bool]:
    """What the correction's wording turns on: whether kept text goes back as an assistant
    message, and whether the request offers tools or has used them."""
    return kept.text.strip() != "", uses_tools(original)


def build_continuation(
    editor: RequestEditor,
    original: Mapping[str, Any],
    kept: KeptWork,
    loop: LoopSummary,
    lang: Lang,
) -> dict[str, Any]:
    """The continuation request body (retry overrides are applied separately)."""
    body = strip_dsh_fields(original)
    kept_text, tools = correction_inputs(original, kept)
    if kept_text:
        body = editor.with_assistant_text(body, kept)
    correction = notes.correction(loop, kept.reasoning.strip(), kept_text, lang, tools)
    return editor.with_user_text(body, correction)


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
