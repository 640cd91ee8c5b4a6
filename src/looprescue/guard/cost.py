"""What a tool loop costs in input tokens, estimated from the request that carries it.

Every request of an agent sends its whole history again. The request that followed loop call
``i`` carried the history up to that call's result, so the loop's cost so far is read from the
current request alone: the tokens of each such prefix (the messages up to that result, plus
the rest of the body: system prompt, tool definitions). Tokens are estimated from the JSON text
(``rescue.budget.estimate_tokens``, on the high side); the upstream's own count is not known
before it answers, and never for a request the guard stops.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..rescue.budget import estimate_tokens
from ..wire import jsonfast
from .judge import ToolLoop


@dataclass(frozen=True, slots=True)
class LoopCost:
    # input tokens of the loop's requests before this one: those that followed its second to
    # its last but one call (a first call alone is no repeat yet)
    earlier_tokens: int
    request_tokens: int  # input tokens of this request
    price: float | None  # dollars per million input tokens of the request's model, if known

    def dollars(self, tokens: int) -> float | None:
        return None if self.price is None else round(tokens * self.price / 1e6, 6)


def _tokens(value: Any) -> int:
    try:
        return estimate_tokens(jsonfast.dumps(value).decode("utf-8", "replace"))
    except (TypeError, ValueError):
        return estimate_tokens(repr(value))


def loop_cost(body: Mapping[str, Any], loop: ToolLoop, prices: Mapping[str, float]) -> LoopCost:
    # the history: ``messages`` (Messages, Chat Completions) or ``input`` (Responses); the
    # loop's message indexes point into it
    field = "messages" if "messages" in body else "input"
    messages = body.get(field)
    messages = messages if isinstance(messages, list) else []
    base = _tokens({key: value for key, value in body.items() if key != field})
    prefix = [base]  # prefix[i]: the body with messages[:i]
    for message in messages:
        prefix.append(prefix[-1] + _tokens(message))
    earlier = sum(prefix[index + 1] for index in loop.messages[1:-1] if index < len(messages))
    model = body.get("model")
    price = next(
        (
            value
            for glob, value in prices.items()
            if isinstance(model, str) and fnmatch.fnmatchcase(model, glob)
        ),
        None,
    )
    return LoopCost(earlier, prefix[-1], price)
