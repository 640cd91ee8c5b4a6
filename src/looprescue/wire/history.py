"""How each protocol's request history is pruned: the wire objects' ``prune_history``.

``rescue.sanitize`` decides what to cut in a text; this module knows where the texts of an
earlier assistant message sit in each protocol, and what a provider requires of an edited
message. Anything that is not such a text (tool calls, tool results, user messages, unknown
blocks and fields) is carried over as the very same object, so it serializes to the same bytes.

Anthropic Messages: ``text`` and ``thinking`` blocks (or a string ``content``). A signature
covers the thinking text it was issued for, so a pruned thinking block has none; one the proxy
pruned earlier reached the client without one too. When the upstream signs thinking (some
thinking block of the request carries a signature), such an unsigned block would be rejected:
it is dropped. A provider may drop thinking of earlier turns anyway, and a rescued response
holds the continuation's own signed thinking block after it. When no thinking block of the
request is signed (an upstream that does not sign), a pruned thinking block stays a thinking
block, cut with the marker, as ``clean`` leaves it. An empty thinking block is never sent, and
an assistant message left without content is dropped.

OpenAI Chat Completions: a string ``content`` or its ``text`` parts, and the reasoning fields
(``reasoning_content``, ``reasoning``). A reasoning field keeps its key even when the cut leaves
it empty: DeepSeek requires ``reasoning_content`` on assistant messages of tool-call turns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..pruning import TextCut
from ..rescue.sanitize import HistoryCut, HistoryPruner, earlier_assistant_messages


def anthropic_history(
    body: Mapping[str, Any], pruner: HistoryPruner
) -> tuple[dict[str, Any] | None, list[HistoryCut]]:
    signs = any(
        _signed(block)
        for _, message in earlier_assistant_messages(body)
        for block in _blocks(message)
    )
    cuts: list[HistoryCut] = []
    replaced: dict[int, dict[str, Any] | None] = {}  # position -> new message (None: dropped)
    for position, message in earlier_assistant_messages(body):
        content = message.get("content")
        if isinstance(content, str):
            text = _pruned(pruner, cuts, position, None, "content", "text", content)
            if text is not None:
                replaced[position] = {**message, "content": text}
        elif isinstance(content, list):
            blocks, changed = _anthropic_blocks(position, content, pruner, signs, cuts)
            if changed:
                replaced[position] = {**message, "content": blocks} if blocks else None
    return _with_messages(body, replaced), cuts


def _anthropic_blocks(
    position: int,
    content: list[Any],
    pruner: HistoryPruner,
    signs: bool,
    cuts: list[HistoryCut],
) -> tuple[list[Any], bool]:
    blocks: list[Any] = []
    changed = False
    for index, block in enumerate(content):
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text" and isinstance(block.get("text"), str):
            text = _pruned(pruner, cuts, position, index, "text", "text", block["text"])
            blocks.append(block if text is None else {**block, "text": text})
            changed = changed or text is not None
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            thinking = block["thinking"]
            found = pruner(thinking, "reasoning")
            rule = found[1] if found is not None else None
            if signs and (found is not None or not _signed(block)):
                # no valid signature for it: a signing upstream would reject the request
                cuts.append(
                    HistoryCut(
                        position, index, "thinking", "reasoning", "dropped", rule, len(thinking), 0
                    )
                )
                changed = True
            elif found is not None:
                cut = found[0]
                cuts.append(_cut(position, index, "thinking", "reasoning", rule, thinking, cut))
                if cut.text:  # an empty thinking block is never sent
                    blocks.append({**block, "thinking": cut.text})
                changed = True
            else:
                blocks.append(block)
        else:
            blocks.append(block)
    return blocks, changed


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _signed(block: Any) -> bool:
    return (
        isinstance(block, Mapping)
        and block.get("type") == "thinking"
        and isinstance(block.get("signature"), str)
        and block["signature"] != ""
    )


def openai_history(
    body: Mapping[str, Any], pruner: HistoryPruner, reasoning_fields: Sequence[str]
) -> tuple[dict[str, Any] | None, list[HistoryCut]]:
    cuts: list[HistoryCut] = []
    replaced: dict[int, dict[str, Any] | None] = {}
    for position, message in earlier_assistant_messages(body):
        new: dict[str, Any] = {}
        content = message.get("content")
        if isinstance(content, str):
            text = _pruned(pruner, cuts, position, None, "content", "text", content)
            if text is not None:
                new["content"] = text
        elif isinstance(content, list):
            parts = [
                _openai_part(pruner, cuts, position, i, part) for i, part in enumerate(content)
            ]
            if any(made is not part for made, part in zip(parts, content, strict=True)):
                new["content"] = parts
        for name in reasoning_fields:
            value = message.get(name)
            if isinstance(value, str):
                text = _pruned(pruner, cuts, position, None, name, "reasoning", value)
                if text is not None:
                    new[name] = text  # the key stays, even empty (DeepSeek requires it)
        if new:
            replaced[position] = {**message, **new}
    return _with_messages(body, replaced), cuts


def _openai_part(
    pruner: HistoryPruner, cuts: list[HistoryCut], position: int, index: int, part: Any
) -> Any:
    if (
        isinstance(part, Mapping)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    ):
        text = _pruned(pruner, cuts, position, index, "text", "text", part["text"])
        if text is not None:
            return {**part, "text": text}
    return part


# --------------------------------------------------------------------------- shared


def _pruned(
    pruner: HistoryPruner,
    cuts: list[HistoryCut],
    position: int,
    block: int | None,
    field: str,
    channel: str,
    text: str,
) -> str | None:
    """``text`` with its loop cut out (recorded in ``cuts``), or None when it has none."""
    found = pruner(text, channel)
    if found is None:
        return None
    cut, rule = found
    cuts.append(_cut(position, block, field, channel, rule, text, cut))
    return cut.text


def _cut(
    message: int, block: int | None, field: str, channel: str, rule: str, text: str, cut: TextCut
) -> HistoryCut:
    return HistoryCut(message, block, field, channel, "pruned", rule, len(text), cut.kept_chars)


def _with_messages(
    body: Mapping[str, Any], replaced: Mapping[int, dict[str, Any] | None]
) -> dict[str, Any] | None:
    """``body`` with the replaced messages (None: dropped); None when nothing was replaced."""
    if not replaced:
        return None
    messages = body["messages"]
    kept = [replaced.get(i, message) for i, message in enumerate(messages)]
    return {**body, "messages": [message for message in kept if message is not None]}
