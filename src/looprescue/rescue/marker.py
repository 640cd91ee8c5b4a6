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


def cut_note(channel: str, lang: Lang) -> str:
    """Visible note that ends a response cut in ``cut`` mode (the marker of a reasoning loop
    sits in the reasoning, which many clients do not show)."""
    word = _CHANNEL_WORD[lang].get(channel, channel)
    if lang == "zh":
        return f"〔回复的{word}陷入重复，已在此截断。〕"
    return f"〔The response started repeating itself in its {word} and was cut here.〕"


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


# a sentence ends at its mark: after whitespace in English, at once in Chinese
_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+|(?<=[。！？：])|\n+")
# shorter sentences of a correction are phrases an answer may well contain
ECHO_SENTENCE_CHARS = 16


def correction_sentences(
    loop: LoopSummary, kept_text: bool, lang: Lang, tools: bool = False
) -> tuple[str, ...]:
    """The sentences of a continuation's correction (without the model's own reasoning it
    quotes) that an answer has no reason to contain: a continuation that writes one out is
    copying its instructions instead of doing the task (the ``parrot`` rule). The tag the
    correction starts with is one of them, short as it is: an answer has no reason to write it,
    and a small model that copies its instructions tends to copy the tag with a mangled
    sentence after it (``1. 上一条回答：[looprescue] 上一条回答开始重复，可以编辑…``)."""
    text = correction(loop, "", kept_text, lang, tools)
    parts = (part.strip().removeprefix(TAG).strip() for part in _SENTENCE_END.split(text))
    return (TAG, *dict.fromkeys(p for p in parts if len(p) >= ECHO_SENTENCE_CHARS))


def correction(
    loop: LoopSummary, kept_reasoning: str, kept_text: bool, lang: Lang, tools: bool = False
) -> str:
    """The user-turn text of a continuation request.

    It says that the answer (or its reasoning) started repeating and that the repetition was
    removed, and asks to go on after what was kept, without repeating, and to stop once the
    answer is complete. It quotes nothing of the loop: every char of it sent back is one the
    model may pick up again. Brief on purpose: sent a longer one (the loop's rule, counts and
    first phrase, and a workspace warning whether or not the request had tools), a small
    model wrote about it instead of finishing its answer (docs/e2e.md, "Replaying
    continuations": 23-24 of 37 continuations end with ``stop`` with this text, 14-18 with
    that one).
    ``kept_reasoning`` (may be empty) is the model's own reasoning before the loop began,
    quoted so the model can build on it without the provider having to accept an edited,
    unsigned thinking block. ``tools``: the request offers tools or has used them, so tool
    calls of earlier steps may have run; the model is asked to check before repeating one.
    """
    reasoning = loop.channel == "reasoning"
    if lang == "zh":
        subject = "上一次回复的推理" if reasoning else "上一条回答"
        parts = [f"{TAG} {subject}开始重复，重复的部分已删除。"]
        if kept_reasoning:
            parts += ["你在陷入重复之前的推理如下，可以直接在此基础上继续：", kept_reasoning]
        if kept_text:
            parts.append("请接着上一条回答写完，不要重复，写完就结束。")
        else:
            parts.append("请继续完成任务，不要重复，写完就结束。")
        if tools:
            parts.append(
                "之前步骤中的工具调用可能已经执行过：在重复任何有副作用的操作之前，先检查工作区的当前状态。"
            )
        return "\n\n".join(parts)
    subject = "reasoning" if reasoning else "answer"
    parts = [f"{TAG} Your previous {subject} started repeating; the repeated part was removed."]
    if kept_reasoning:
        parts += ["Your reasoning before the repetition began, to build on:", kept_reasoning]
    if kept_text:
        parts.append(
            "Continue the answer after the previous assistant message (the user has already "
            "seen it), without repeating, and stop when the answer is complete."
        )
    else:
        parts.append("Continue the task without repeating, and stop when the answer is complete.")
    if tools:
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
