"""Rule echo: special chat tokens written out past the end of a turn, and tokens quoted as docs."""

from __future__ import annotations

from tests.detect_helpers import stream

from looprescue.detect import scan_text


def test_the_chat_echoed_after_an_end_of_turn_token():
    answer = "The capital of France is Paris."
    echo = "".join(
        f"<|im_end|>\n<|im_start|>user\nAnd of Spain?<|im_end|>\n<|im_start|>assistant{n}\n"
        for n in range(1, 20)
    )
    hit = stream(answer + echo, "text")
    assert hit is not None and hit.rule == "echo"
    assert hit.prune_offset == len(answer)  # the answer stays, nothing after its end of turn


def test_special_tokens_quoted_as_documentation_are_not_an_echo():
    doc = (
        "ChatML wraps every turn: a turn opens with `<|im_start|>` and a role and closes with "
        "`<|im_end|>`; Llama 2 closes with `</s>` instead, and Gemma uses `<end_of_turn>`.\n\n"
        "```\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n```\n"
    )
    assert scan_text(doc, "text") == []
