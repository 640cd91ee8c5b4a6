"""Cutting loop text out of one ``assistant/message`` event (FORMAT.md §8.2). Pure functions.

The cut is applied to ``message.content`` (what DSH replays) and mirrored into ``data.stream``
(packed deltas and the ``block-end`` block) so the stream still replays to exactly the new
content. ``message.source.replayState`` is removed: its signatures cover the original text.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass

from looprescue.dsh.stream import PACKED_ROW_TYPES, expand_stream
from looprescue.pruning import Language, cut_text, marker_text, pick_language

__all__ = [
    "BlockCut",
    "Language",
    "cut_assistant_message",
    "marker_text",
    "pick_language",
    "stream_problems",
]
TEXT_BLOCK_TYPES = {"reasoning": "reasoning", "text": "text"}
_DELTA_TYPES = {"reasoning-delta", "text-delta"}
_TEXT_ROW_TYPES = {"reasoning-chunks", "text-chunks"}


@dataclass(frozen=True, slots=True)
class BlockCut:
    """What happened to one content block."""

    index: int
    channel: str
    original_chars: int
    kept_chars: int
    marker: str | None
    dropped: bool

    @property
    def removed_chars(self) -> int:
        return self.original_chars - self.kept_chars


def cut_assistant_message(
    event: dict,
    keep: Mapping[int, int],
    *,
    marker: bool = True,
    language: Language = "auto",
) -> tuple[dict, list[BlockCut]]:
    """Return a copy of ``event`` with each content block ``i`` in ``keep`` cut to ``keep[i]``
    chars (plus a marker line), and the list of cuts made.

    A block left empty (cut at 0 without a marker) is dropped entirely, as DSH would otherwise
    send an empty thinking block upstream; stream indexes after it are renumbered.
    """
    new = copy.deepcopy(event)
    data = new["data"]
    message = data["message"]
    content = message["content"]
    cuts: list[BlockCut] = []
    new_texts: dict[int, str] = {}
    for index, keep_chars in sorted(keep.items()):
        block = content[index]
        channel = TEXT_BLOCK_TYPES.get(block.get("type"))
        if channel is None:
            raise ValueError(f"content block {index} is a {block.get('type')} block, not text")
        text = block["text"]
        cut = cut_text(text, keep_chars, channel, marker=marker, language=language)
        if cut is None:
            continue
        new_texts[index] = cut.text
        cuts.append(
            BlockCut(index, channel, len(text), cut.kept_chars, cut.marker, dropped=cut.text == "")
        )
    if not cuts:
        return new, []
    dropped = sorted(c.index for c in cuts if c.dropped)
    for index, text in new_texts.items():
        content[index]["text"] = text
    message["content"] = [b for i, b in enumerate(content) if i not in dropped]
    source = message.get("source")
    if isinstance(source, dict):
        source.pop("replayState", None)
    if isinstance(data.get("stream"), list):
        data["stream"] = _cut_stream(data["stream"], new_texts, dropped)
    return new, cuts


def _cut_stream(stream: list, new_texts: dict[int, str], dropped: list[int]) -> list:
    """Rewrite deltas and block-ends of the cut blocks; renumber indexes after dropped ones."""
    # How many original chars of each cut block the deltas may still carry, and the suffix
    # (the marker) they must end with.
    originals = _original_texts(stream)
    budget: dict[int, int] = {}
    suffix: dict[int, str] = {}
    for index, text in new_texts.items():
        original = originals.get(index, "")
        common = _common_prefix(original, text)
        budget[index] = common
        suffix[index] = text[common:]
    out: list = []
    last_carrier: dict[int, dict] = {}  # block index -> last packed row / delta chunk kept
    block_start: dict[int, int] = {}
    for entry in stream:
        index = _entry_index(entry)
        if index in dropped:
            continue
        if index in budget and entry["type"] in _TEXT_ROW_TYPES:
            members = entry["texts"]
            kept: list[str] = []
            for piece in members:
                if budget[index] <= 0:
                    break
                kept.append(piece[: budget[index]])
                budget[index] -= len(kept[-1])
            if not kept:
                continue
            row = dict(entry)
            row["texts"] = kept
            row["dt"] = list(entry["dt"][: len(kept) - 1])
            entry = row
            last_carrier[index] = row
        elif index in budget and entry["type"] == "chunk":
            chunk = entry["chunk"]
            if chunk.get("type") in _DELTA_TYPES:
                if budget[index] <= 0:
                    continue
                piece = chunk["text"][: budget[index]]
                budget[index] -= len(piece)
                entry = {**entry, "chunk": {**chunk, "text": piece}}
                last_carrier[index] = entry
            elif chunk.get("type") == "block-end":
                block = dict(chunk["block"])
                block["text"] = new_texts[index]
                entry = {**entry, "chunk": {**chunk, "block": block}}
            elif chunk.get("type") == "block-start":
                block_start[index] = len(out)
        if entry["type"] == "chunk" and entry["chunk"].get("type") == "finish":
            entry = _finish_without_stale_signatures(entry, set(new_texts), dropped)
        out.append(_renumbered(entry, dropped))
    for index, tail in suffix.items():
        if not tail:
            continue
        carrier = last_carrier.get(index)
        if carrier is None:
            # Nothing of the original deltas survived: add one packed row after block-start.
            row_type = _row_type_for(stream, index)
            start_pos = block_start.get(index, len(out) - 1)
            start_time = out[start_pos].get("time", 0) if 0 <= start_pos < len(out) else 0
            row = {"type": row_type, "time0": start_time, "index": index, "dt": [], "texts": []}
            out.insert(start_pos + 1, _renumbered(row, dropped))
            carrier = out[start_pos + 1]
        if carrier["type"] in PACKED_ROW_TYPES:
            if carrier["texts"]:
                carrier["dt"].append(0)
            carrier["texts"].append(tail)
        else:
            carrier["chunk"]["text"] += tail
    return out


def _original_texts(stream: list) -> dict[int, str]:
    parts: dict[int, list[str]] = {}
    for _time, chunk in expand_stream(stream):
        if chunk.get("type") in _DELTA_TYPES:
            parts.setdefault(chunk["index"], []).append(chunk["text"])
    return {index: "".join(p) for index, p in parts.items()}


def _row_type_for(stream: list, index: int) -> str:
    for _time, chunk in expand_stream(stream):
        if chunk.get("type") == "block-start" and chunk.get("index") == index:
            return "reasoning-chunks" if chunk.get("blockType") == "reasoning" else "text-chunks"
    return "text-chunks"


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _entry_index(entry: dict) -> int | None:
    if entry.get("type") == "chunk":
        return entry["chunk"].get("index")
    return entry.get("index")


def _renumbered(entry: dict, dropped: list[int]) -> dict:
    if not dropped:
        return entry
    index = _entry_index(entry)
    if index is None:
        return entry
    shift = sum(1 for d in dropped if d < index)
    if not shift:
        return entry
    if entry["type"] == "chunk":
        return {**entry, "chunk": {**entry["chunk"], "index": index - shift}}
    return {**entry, "index": index - shift}


def _finish_without_stale_signatures(entry: dict, edited: set[int], dropped: list[int]) -> dict:
    """The finish chunk's replayState: drop signatures of edited blocks and dropped entries."""
    chunk = entry["chunk"]
    state = chunk.get("replayState")
    if not isinstance(state, dict) or not isinstance(state.get("blocks"), list):
        return entry
    blocks = []
    for i, block in enumerate(state["blocks"]):
        if i in dropped:
            continue
        if i in edited and isinstance(block, dict):
            block = {k: v for k, v in block.items() if k not in ("signature", "thinkingSignature")}
        blocks.append(block)
    return {**entry, "chunk": {**chunk, "replayState": {**state, "blocks": blocks}}}


def stream_problems(event: dict) -> list[str]:
    """Ways the stream of an assistant message disagrees with its content (empty = consistent).

    Checks reasoning/text blocks only: pi-ai tool calls legitimately differ (FORMAT.md §6.5).
    """
    data = event["data"]
    stream = data.get("stream")
    if not isinstance(stream, list):
        return []
    content = data["message"]["content"]
    deltas: dict[int, list[str]] = {}
    ends: dict[int, dict] = {}
    for _time, chunk in expand_stream(stream):
        kind = chunk.get("type")
        if kind in _DELTA_TYPES:
            deltas.setdefault(chunk["index"], []).append(chunk["text"])
        elif kind == "block-end":
            ends[chunk["index"]] = chunk["block"]
    problems = []
    for i, block in enumerate(content):
        if block.get("type") not in TEXT_BLOCK_TYPES:
            continue
        if "".join(deltas.get(i, [])) != block["text"]:
            problems.append(f"block {i}: deltas do not add up to the content text")
        if ends.get(i) != block:
            problems.append(f"block {i}: block-end differs from the content block")
    return problems
