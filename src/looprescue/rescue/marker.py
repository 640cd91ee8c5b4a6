"""Localized one-line markers, notes and the correction text sent with a continuation.

Everything the proxy itself writes into a conversation lives here, in English and Chinese, so
wording stays consistent and the language rule is applied in one place.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .continuation import LoopSummary

# what the proxy's own turns start with (a model has no reason to write it)
TAG = "[looprescue]"

Lang = Literal["en", "zh"]

_CHANNEL_WORD = {
    "en": {"reasoning": "reasoning", "text": "text"},
    "zh": {"reasoning": "推理", "text": "文本"},
}


def marker(channel: str, chars: int, lang: Lang) -> str:
    """The bracketed note that stands in for removed loop text (no newlines around it)."""
    word = _CHANNEL_WORD[lang].get(channel, channel)
    if lang == "zh":
        return f"〔已删除 {chars} 个字符的重复{word}〕"
    return f"〔{chars} chars of repeated {word} removed〕"


def budget_note(budget: int, lang: Lang) -> str:
    """Visible note when a loop is cut with too little of the client's token budget left to
    resume."""
    if lang == "zh":
        return (
            f"〔回复陷入重复，已截断；本次回复的 {budget} 个 token 额度已基本用完，不再自动继续。〕"
        )
    return (
        f"〔The response started repeating itself and was cut. Too little of its {budget}-token "
        "budget was left to resume it.〕"
    )


def cap_note(rescues: int, lang: Lang) -> str:
    """Visible note when the consecutive-rescue cap stops a resume."""
    if lang == "zh":
        return (
            f"〔回复陷入重复，已截断；本对话已连续自动恢复 {rescues} 次，"
            "不再自动继续。请检查后重新提问。〕"
        )
    return (
        f"〔The response started repeating itself and was cut. {rescues} automatic resumes in a "
        "row already happened in this conversation, so it was not resumed again; please check "
        "and ask again.〕"
    )


def resume_failed_note(reason: str, lang: Lang) -> str:
    """Visible note when the continuation request failed or produced nothing in time."""
    if lang == "zh":
        return f"〔回复陷入重复，已截断；自动继续失败（{reason}）。请重新提问。〕"
    return (
        f"〔The response started repeating itself and was cut; resuming it failed ({reason}). "
        "Please ask again.〕"
    )


# a sentence ends at its mark: after whitespace in English, at once in Chinese
_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+|(?<=[。！？：])|\n+")
# shorter sentences of a correction are phrases an answer may well contain
ECHO_SENTENCE_CHARS = 16


def correction_sentences(loop: LoopSummary, kept_text: bool, lang: Lang) -> tuple[str, ...]:
    """The sentences of a continuation's correction (without the model's own reasoning it
    quotes) that an answer has no reason to contain: a continuation that writes one out is
    copying its instructions instead of doing the task (the ``parrot`` rule)."""
    text = correction(loop, "", kept_text, lang)
    parts = (part.strip().removeprefix(TAG).strip() for part in _SENTENCE_END.split(text))
    return tuple(dict.fromkeys(p for p in parts if len(p) >= ECHO_SENTENCE_CHARS))


def correction(loop: LoopSummary, kept_reasoning: str, kept_text: bool, lang: Lang) -> str:
    """The user-turn text of a continuation request.

    It describes the loop in words (channel, detector rule, how often, how much was removed,
    where it began) and quotes at most one short phrase of it, so the loop itself is
    not sent back; it asks to continue without repeating or restarting, and to check the
    workspace before repeating side-effecting actions (tools may already have run).
    ``kept_reasoning`` (may be empty) is the model's own reasoning before the loop began; it is
    quoted so the model can build on it without the provider having to accept an edited,
    unsigned thinking block.
    """
    word = _CHANNEL_WORD[lang].get(loop.channel, loop.channel)
    times = f"{loop.repeats:.0f}" if loop.repeats >= 1 else "several"
    if lang == "zh":
        parts = [
            f"{TAG} 你上一次回复的{word}陷入了重复（检测规则 {loop.rule}）：同一段内容被反复"
            f"输出了约 {times} 次，共删除 {loop.chars_removed} 个字符。它以「{loop.phrase}」开头。",
        ]
        if loop.onset:
            parts.append(f"重复开始之前的 {loop.onset} 个字符都保留了下来。")
        parts.append("请从中断处继续完成任务，不要再重复这段内容，也不要从头开始。")
        if kept_reasoning:
            parts += ["你在陷入重复之前的推理如下，可以直接在此基础上继续：", kept_reasoning]
        if kept_text:
            parts.append("上一条助手消息是已经展示给用户的部分回答，请接着它写，不要重复。")
        parts.append(
            "之前步骤中的工具调用可能已经执行过：在重复任何有副作用的操作之前，先检查工作区的当前状态。"
        )
        return "\n\n".join(parts)
    parts = [
        f"{TAG} Your previous response started repeating itself in its {word} (detector "
        f"rule {loop.rule}): one passage came about {times} times ({loop.chars_removed} chars "
        f"removed). It began with «{loop.phrase}».",
    ]
    if loop.onset:
        parts.append(
            f"The {loop.onset} chars of {word} before the repetition began are kept: that is the "
            "work you were doing."
        )
    parts.append(
        "Continue the task from where you stopped, without repeating that passage and without "
        "starting over."
    )
    if kept_reasoning:
        parts += ["Your reasoning before the repetition began, to build on:", kept_reasoning]
    if kept_text:
        parts.append(
            "The previous assistant message is the part of the answer the user has already "
            "seen; continue after it without restating it."
        )
    # Last, with or without tools in the request: without it, make e2e saw a small model echo
    # the sentence that then came last into its answer.
    parts.append(
        "Tool calls from earlier steps may already have run: check the current state of the "
        "workspace before repeating any action that has side effects."
    )
    return "\n\n".join(parts)


def stall_nudge(lang: Lang) -> str:
    """Added to a request after several reasoning-only responses in a row."""
    if lang == "zh":
        return (
            "[looprescue] 你最近几次回复都只有思考，没有回答也没有调用工具。"
            "现在请直接调用需要的工具，或者给出回答。"
        )
    return (
        "[looprescue] Your last few responses contained only reasoning, with no answer and no "
        "tool call. Now either call the tool you need or give your answer."
    )


def shorten(text: str, limit: int = 200) -> str:
    """One-line excerpt of ``text`` for notes and corrections."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + "…"
