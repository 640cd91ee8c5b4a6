"""Cutting loop text out of one assistant message: content, stream and replayState agree."""

from __future__ import annotations

import copy

from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.test_dsh_helpers import fixture_log

from looprescue.dsh import expand_stream, open_log
from looprescue.dsh.prune import cut_assistant_message, marker_text, pick_language, stream_problems


def message_event(blocks: list[tuple[str, list[str]]], *, pi_ai: bool = False, packed=True):
    """An assistant/message whose block i is ``(type, deltas)``, streamed like DSH does."""
    content, stream, ends = [], [], []
    for index, (kind, deltas) in enumerate(blocks):
        block = {"type": kind, "text": "".join(deltas)}
        content.append(block)
        stream.append({"type": "chunk", "time": 10, "chunk": {"type": "block-start",
                       "index": index, "blockType": kind}})  # fmt: skip
        if packed:
            stream.append({"type": f"{kind}-chunks", "time0": 11, "index": index,
                           "dt": [1] * (len(deltas) - 1), "texts": list(deltas)})  # fmt: skip
        else:
            for piece in deltas:
                stream.append({"type": "chunk", "time": 11, "chunk": {"type": f"{kind}-delta",
                               "index": index, "text": piece}})  # fmt: skip
        end = {"type": "chunk", "time": 12, "chunk": {"type": "block-end", "index": index,
               "block": dict(block)}}  # fmt: skip
        (ends if pi_ai else stream).append(end)
    stream.extend(ends)
    state = {
        "response": {"kind": "deepseek-messages"},
        "blocks": [{"type": k, "signature": f"sig{i}"} for i, (k, _) in enumerate(blocks)],
    }
    stream.append({"type": "chunk", "time": 13, "chunk": {"type": "finish",
                   "reason": {"kind": "stop"}, "replayState": copy.deepcopy(state)}})  # fmt: skip
    message = {"role": "assistant", "content": content,
               "source": {"kind": "model", "replayState": state}, "id": "m1"}  # fmt: skip
    return {"type": "assistant/message", "seq": 5, "time": 14,
            "data": {"turn": 1, "step": 1, "message": message, "stream": stream}}  # fmt: skip


pieces = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    reasoning=pieces,
    text=pieces,
    cut=st.integers(min_value=0, max_value=120),
    which=st.sampled_from([0, 1]),
    marker=st.booleans(),
    pi_ai=st.booleans(),
    packed=st.booleans(),
)
# kept text that ends a line: the note follows it without a blank line
@example(
    reasoning=["0" * 31 + "\n", "0"],
    text=["0"],
    cut=32,
    which=0,
    marker=True,
    pi_ai=False,
    packed=False,
)
def test_cut_keeps_content_and_stream_in_agreement(
    reasoning, text, cut, which, marker, pi_ai, packed
):
    event = message_event([("reasoning", reasoning), ("text", text)], pi_ai=pi_ai, packed=packed)
    original = event["data"]["message"]["content"][which]["text"]
    new, cuts = cut_assistant_message(event, {which: cut}, marker=marker, language="en")
    assert event == message_event(
        [("reasoning", reasoning), ("text", text)], pi_ai=pi_ai, packed=packed
    )
    assert stream_problems(new) == []
    content = new["data"]["message"]["content"]
    if cut >= len(original):
        assert cuts == [] and new == event
        return
    [made] = cuts
    assert made.removed_chars == len(original) - cut
    if made.dropped:
        assert not marker and cut == 0
        assert len(content) == 1
        starts = [c for _t, c in expand_stream(new["data"]["stream"]) if c["type"] == "block-start"]
        assert [c["index"] for c in starts] == [0]  # renumbered after the dropped block
        return
    kept = original[:cut]
    note = marker_text(len(original) - cut, made.channel, "en")
    # the note goes on a line of its own (no blank line when the kept text ends one)
    newline = "\n" if kept and not kept.endswith("\n") else ""
    expected = kept + (newline + note if marker else "")
    assert content[which]["text"] == expected
    assert "replayState" not in new["data"]["message"]["source"]
    finish = next(c for _t, c in expand_stream(new["data"]["stream"]) if c["type"] == "finish")
    signatures = [b.get("signature") for b in finish["replayState"]["blocks"]]
    assert signatures[which] is None and signatures[1 - which] == f"sig{1 - which}"


def test_real_message_cut_and_rows_stay_packed():
    event = next(e for e in open_log(fixture_log("a_reasoning_loop")).events() if e["seq"] == 17)
    new, [made] = cut_assistant_message(event, {0: 306})
    rows = [e for e in new["data"]["stream"] if e["type"] == "reasoning-chunks"]
    assert len(rows) == 1 and len(rows[0]["dt"]) == len(rows[0]["texts"]) - 1
    assert rows[0]["texts"][-1] == "\n" + made.marker
    assert new["data"]["message"]["content"][1] == event["data"]["message"]["content"][1]
    assert new["data"]["usage"] == event["data"]["usage"]
    assert list(new) == list(event) and list(new["data"]) == list(event["data"])  # key order


def test_marker_language():
    assert pick_language("The loader merges layers.") == "en"
    assert pick_language("加载器按顺序合并各层配置。") == "zh"
    assert pick_language("anything", "zh") == "zh"
    assert marker_text(12, "reasoning", "en") == "〔12 chars of repeated reasoning removed〕"
    assert marker_text(12, "text", "zh") == "〔已删除 12 个字符的重复内容〕"
