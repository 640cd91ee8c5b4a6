"""What the guard writes, in English and Chinese: the note a steered request carries to the
model, and the assistant message a stopped request answers with."""

from __future__ import annotations

from ..rescue.marker import TAG, Lang
from .judge import ToolLoop


def _what(loop: ToolLoop, lang: Lang) -> str:
    """The loop in one sentence, naming the calls."""
    if lang == "zh":
        if loop.kind == "cycle":
            return (
                f"你已连续 {loop.count} 次重复同一组工具调用（{' → '.join(loop.calls)}），"
                "参数相同，每次结果也完全相同。"
            )
        if loop.kind == "failure":
            return f"工具调用 {loop.calls[0]} 已失败 {loop.count} 次，参数相同，每次错误也相同。"
        return f"你已连续 {loop.count} 次调用 {loop.calls[0]}，参数相同，结果也没有任何变化。"
    if loop.kind == "cycle":
        return (
            f"You have repeated the same sequence of tool calls ({' → '.join(loop.calls)}) "
            f"{loop.count} times in a row, with the same arguments, and the results have not "
            "changed."
        )
    if loop.kind == "failure":
        return (
            f"The call {loop.calls[0]} has failed {loop.count} times with the same arguments "
            "and the same error."
        )
    return (
        f"You have called {loop.calls[0]} {loop.count} times in a row with the same arguments, "
        "and its result has not changed."
    )


def steer_note(loop: ToolLoop, lang: Lang) -> str:
    """Added to the request that goes upstream (never to the client's history)."""
    if lang == "zh":
        return (
            f"{TAG} {_what(loop, lang)}再次调用不会得到不同的结果。"
            "请直接使用已有的结果，换一种做法，或者告诉用户是什么阻碍了你。"
        )
    return (
        f"{TAG} {_what(loop, lang)} Calling it again will not give a different result. Use the "
        "result you already have, try a different approach, or tell the user what is blocking "
        "you."
    )


def stop_message(loop: ToolLoop, lang: Lang, steered: bool) -> str:
    """The assistant message a stopped request answers with (the model was not called).
    ``steered``: the model was told about the loop before."""
    if lang == "zh":
        after = "在收到提示后它仍在重复，所以" if steered else ""
        return (
            f"{TAG} 已停止：智能体陷入了工具调用循环。{_what(loop, lang)}"
            f"{after}这一步没有再发送给模型。请发送新消息继续，例如告诉它换一种做法。"
        )
    what = _what(loop, lang).replace("You have", "The agent has", 1)
    after = "It kept going after a note saying so, so this" if steered else "This"
    return (
        f"{TAG} Stopped: the agent is stuck in a tool-call loop. {what} {after} step was not "
        "sent to the model. Send a new message to go on, for example to tell it what to do "
        "differently."
    )
