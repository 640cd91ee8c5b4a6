"""The continuation replay of make e2e: the requests it rebuilds from a client log."""

from __future__ import annotations

from e2e.replay import (
    continuation_budget,
    first_continuation,
    request_body,
    with_current_correction,
)

from looprescue.config import LoopRescueConfig

PROMPT = {"role": "user", "content": "用Python写20个函数 func_1 到 func_20。"}
KEPT = {"role": "assistant", "content": "```python\ndef func_1():\n    return 1\n"}
OLD = {"role": "user", "content": "[looprescue] 你上一次回复的文本陷入了重复（检测规则 cycle）…"}
RECORD = {
    "id": "zh-code-funcs",
    "attempts": ["188?", "467l"],
    "upstream": [{"messages": [PROMPT], "text": "…"}, {"messages": [PROMPT, KEPT, OLD]}],
}


def test_the_correction_is_rewritten_and_the_rest_kept() -> None:
    messages = first_continuation(RECORD)
    assert messages == [PROMPT, KEPT, OLD]
    rebuilt = with_current_correction(messages)
    assert rebuilt[:2] == [PROMPT, KEPT] and rebuilt[2]["role"] == "user"
    text = rebuilt[2]["content"]
    assert text.startswith("[looprescue]") and "请接着上一条回答写完" in text  # zh, text kept
    assert "工作区" not in text  # no tools in the request
    assert first_continuation({"upstream": RECORD["upstream"][:1]}) is None


def test_budget_and_sampling_are_the_continuations() -> None:
    assert continuation_budget(RECORD, 700) == 512
    body = request_body([PROMPT], 512, 7, [])
    assert body["max_tokens"] == 512 and body["seed"] == 7
    defaults = LoopRescueConfig()
    assert body["temperature"] == defaults.retryTemperature
    assert body["frequency_penalty"] == defaults.retryFrequencyPenalty
    body = request_body([PROMPT], 512, 7, ["retryTemperature=0.7", "retryPresencePenalty=null"])
    assert body["temperature"] == 0.7 and "presence_penalty" not in body
    assert request_body([PROMPT], 512, 7, ["retryTemperature=null"])["temperature"] == 0
