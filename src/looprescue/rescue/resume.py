"""The continuation: what one response carries from a cut attempt to the next.

After a cut, the response goes on with a continuation request (``continuation.py`` builds its
body). :class:`Resumes` owns what the continuations of one response share and the stream does
not: the work kept so far (the client's visible text, its reasoning without the loops cut out
of it), the climb up the recovery ladder (``ladder.py``: sampling, lighter reasoning, the retry
model), the client's output budget and what earlier attempts spent of it, and what each new
attempt's detector must know (:class:`DetectorInputs`).

It is apart from the engine because none of it runs per delta: it is read when a loop is cut,
when a continuation is sent and when the response finishes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..config import LoopRescueConfig, Rung
from . import marker as notes
from .attempt import Attempt, ClientSide, LoopDetector
from .budget import tokens_left
from .continuation import (
    KeptWork,
    LoopSummary,
    RequestEditor,
    build_continuation,
    correction_inputs,
    has_retry_overrides,
)
from .conversation import ConversationState
from .cut import CutPlan
from .events import Usage
from .ladder import rung_for, with_rung
from .marker import Lang


@dataclass(frozen=True, slots=True)
class DetectorInputs:
    """What an attempt's detector is told beside the stream (``detect.StreamDetector``)."""

    # the numbered ranges the client's latest message asks for bound the answer's lists
    asked: tuple[tuple[int, int], ...] = ()
    # and the small counts of sections it asks for bound the answer's headings that name them
    sections: tuple[tuple[int, str], ...] = ()
    # the largest count the human named in the conversation bounds a template counted on
    # (rules.counted); None: no request to bound it
    asked_up_to: int | None = None
    # the last continuation's correction, which its answer must not copy (rules.parrot)
    correction: tuple[str, ...] = ()
    # what a continuation's answer must not write again (rules.restate): the answer the client
    # has, and the kept copy of the last loop cut out of it
    shown: str = ""
    shown_loop: str = ""


class Resumes:
    """The continuations of one response: their requests, and what they carry over."""

    def __init__(
        self,
        config: LoopRescueConfig,
        editor: RequestEditor,
        lang: Lang,
        client: ClientSide,
        budget: int | None,
        inputs: DetectorInputs,
        detector_factory: Callable[[], LoopDetector] | None = None,
    ) -> None:
        self._config = config
        self._editor = editor
        self._lang = lang
        self._client = client
        self._factory = detector_factory  # None: the default StreamDetector
        self.inputs = inputs
        self.budget = budget  # the client's output budget (None: it set none)
        # what the attempts cut before this one cost (their output estimated where the cut
        # left it unreported): the client's usage adds up every attempt
        self._earlier_usage = Usage()
        self._spent_tokens = 0  # earlier attempts' output, estimated where unreported
        # spans of the visible reasoning that belong to a loop (its kept copy): never sent back
        self._loop_spans: list[tuple[int, int]] = []
        self._loop_copy = ""  # the kept copy of the last text loop cut

    def new_detector(self) -> LoopDetector:
        factory = self._factory
        if factory is not None:
            return factory()
        from ..detect import StreamDetector

        inputs = self.inputs
        return StreamDetector(
            self._config,
            watch=self._config.watch,
            asked=inputs.asked,
            asked_up_to=inputs.asked_up_to,
            correction=inputs.correction,
            shown=inputs.shown,
            shown_loop=inputs.shown_loop,
            sections=inputs.sections,
        )

    def spent(self, attempt: Attempt | None) -> int:
        """Output tokens of the response so far: the earlier attempts', and ``attempt``'s when
        given."""
        return self._spent_tokens + (attempt.tokens() if attempt is not None else 0)

    def note_cut(self, plan: CutPlan, attempt: Attempt) -> None:
        """Keep what a continuation must know of a loop just cut out of ``attempt``."""
        if plan.channel == "reasoning" and not attempt.hide_reasoning:
            # the continuation carries the reasoning from before the loop, none of the loop
            base = attempt.visible_base["reasoning"]
            self._loop_spans.append((base + plan.onset, base + plan.point.keep_to))
        self._loop_copy = plan.loop_copy

    def kept_work(self) -> KeptWork:
        """What may go back upstream: the visible reasoning up to where a loop began, and the
        visible text exactly as the client received it (markers excluded)."""
        visible = self._client.visible
        reasoning = "".join(visible["reasoning"])
        if self._loop_spans:
            pieces, position = [], 0
            for start, end in self._loop_spans:
                pieces.append(reasoning[position:start])
                position = end
            reasoning = "".join(pieces) + reasoning[position:]
        return KeptWork(reasoning, "".join(visible["text"]))

    def request(
        self,
        request_body: Mapping[str, Any],
        summary: LoopSummary,
        cut: Attempt,
        spent: int,
        conversation: ConversationState,
        resumes: int,
    ) -> tuple[Mapping[str, Any], Rung, KeptWork]:
        """The ``resumes``-th continuation after ``cut`` (``spent`` output tokens so far): its
        body, its rung of the ladder, and the work it carries. The next attempt's detector
        inputs change with it."""
        config, editor = self._config, self._editor
        self._earlier_usage = self._earlier_usage.added(cut.usage.with_output(cut.tokens()))
        self._spent_tokens = spent
        kept = self.kept_work()
        body: Mapping[str, Any] = build_continuation(
            editor, request_body, kept, summary, self._lang
        )
        conversation.retry_requests_left = config.retryRequests
        if conversation.take_retry_request() and has_retry_overrides(config):
            body = editor.with_retry_overrides(body, config)
        rung = rung_for(config, resumes)
        body = with_rung(editor, body, rung, config)
        left = tokens_left(self.budget, spent)
        if left is not None:
            body = editor.with_output_budget(body, left)
        # the continuation's answer must not copy the correction it is sent
        kept_text, tools = correction_inputs(request_body, kept)
        self.inputs = DetectorInputs(
            asked=self.inputs.asked,
            sections=self.inputs.sections,
            asked_up_to=self.inputs.asked_up_to,
            correction=notes.correction_sentences(summary, kept_text, self._lang, tools),
            shown=kept.text,
            shown_loop=self._loop_copy,
        )
        return body, rung, kept

    def final_usage(self, attempt: Attempt, cut: bool) -> Usage:
        """What the response cost: every upstream attempt's tokens added up. An attempt that
        ended on its own reports its usage (passed on as it is when it was the only one); one
        cut here never does, its output is estimated from what it streamed."""
        if cut:
            usage = attempt.usage.with_output(attempt.tokens())
        elif attempt.number:
            usage = attempt.usage.merged(attempt.reported)
        else:
            return attempt.reported
        return self._earlier_usage.added(usage) if attempt.number else usage
