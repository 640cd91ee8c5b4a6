"""looprescue inside the LiteLLM proxy: a callback that sanitizes the history of each chat
completion on the way in and rescues its answer, streamed or whole, with the proxy's engine.

Turn it on in LiteLLM's ``config.yaml``::

    litellm_settings:
      callbacks: looprescue.integrations.litellm.rescue

``LOOPRESCUE_CONFIG`` may name a looprescue YAML config (default: the defaults). The hooks:

* ``async_pre_call_hook``: judges the request (the same rules as the proxy) and starts its
  engine, whose first request is the client's, sanitized (and nudged or steered when due):
  LiteLLM sends that one; a request the tool-loop guard stops is answered by LiteLLM with the
  guard's message as a mock response, the provider never called;
* ``async_post_call_streaming_iterator_hook`` / ``async_post_call_success_hook``: the answer
  LiteLLM got is fed to the exchange as the upstream's response; a continuation after a cut is
  sent through LiteLLM's own router (same model group, keys and fallbacks), and what the client
  gets is the exchange's output, as LiteLLM's own chunk and response types;
* ``async_post_call_failure_hook``: a request that failed is counted and forgotten.

Counters go to prometheus-client's default registry, which LiteLLM's own ``/metrics`` serves
when its ``prometheus`` callback is on.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from litellm.integrations.custom_logger import CustomLogger
from litellm.types.utils import ModelResponse, ModelResponseStream

from ..config import LoopRescueConfig, load_config
from ..proxy import jsonfast
from ..proxy.openai import OpenAIWire
from ..proxy.service import Rejected, Rescue, RescueService
from ..proxy.sse import SSEParser
from ..proxy.upstream import UpstreamError

# requests started and not answered yet (their answers come in a later hook); bounded so a
# request whose answer hook never runs cannot hold memory forever
PENDING_LIMIT = 4096
# keys LiteLLM adds to a request's data for itself, not part of the client's request
_LITELLM_KEYS = frozenset(
    {
        "litellm_call_id",
        "litellm_logging_obj",
        "proxy_server_request",
        "secret_fields",
        "deployment",
        "shared_session",
        "metadata",
        "litellm_metadata",
    }
)
_CHAT_CALLS = frozenset({"completion", "acompletion"})
_JSON_TYPES = (str, int, float, bool, list, dict, type(None))


def client_body(data: Mapping[str, Any]) -> dict[str, Any]:
    """The request fields of LiteLLM's request ``data``, without what LiteLLM keeps there for
    itself (its call id, logging object, key metadata: objects, not request JSON)."""
    return {
        key: value
        for key, value in data.items()
        if key not in _LITELLM_KEYS
        and not key.startswith(("litellm_", "_litellm", "user_api_key"))
        and isinstance(value, _JSON_TYPES)
    }


class _Stream:
    """LiteLLM's stream of chunks as the upstream response the exchange reads (SSE bytes)."""

    status = 200
    headers: Sequence[tuple[str, str]] = ()

    def __init__(self, chunks: AsyncIterator[Any]) -> None:
        self._chunks = chunks.__aiter__()
        self._ended = False

    async def next_chunk(self) -> bytes:
        if self._ended:
            return b""
        try:
            chunk = await self._chunks.__anext__()
        except StopAsyncIteration:
            self._ended = True
            return b"data: [DONE]\n\n"
        except Exception as err:
            raise UpstreamError("broken", f"LiteLLM stream failed: {err}") from err
        return b"data: " + chunk.model_dump_json().encode() + b"\n\n"

    async def read(self) -> bytes:
        pieces = []
        while piece := await self.next_chunk():
            pieces.append(piece)
        return b"".join(pieces)

    async def aclose(self) -> None:
        closing = getattr(self._chunks, "aclose", None)
        if closing is not None:
            await closing()


class _Whole:
    """A complete response (or an error) as the upstream response the exchange reads."""

    headers: Sequence[tuple[str, str]] = ()

    def __init__(self, status: int, payload: bytes) -> None:
        self.status = status
        self._payload: bytes | None = payload

    async def next_chunk(self) -> bytes:
        payload, self._payload = self._payload, None
        return payload or b""

    async def read(self) -> bytes:
        return await self.next_chunk()

    async def aclose(self) -> None:
        self._payload = None


class LiteLLMUpstream:
    """The exchange's upstream: the response LiteLLM already has for the first request, and
    LiteLLM's router (or ``litellm.acompletion`` outside the proxy) for continuations."""

    def __init__(self, extra: Mapping[str, Any]) -> None:
        self.first: Any = None
        self._extra = dict(extra)  # LiteLLM fields a continuation carries (its metadata)

    async def open(
        self,
        method: str,
        url: str,
        headers: Sequence[tuple[str, str]],
        content: bytes,
        *,
        raw: bool,
    ) -> Any:
        if self.first is not None:
            first, self.first = self.first, None
            return first
        body = jsonfast.loads(content)
        try:
            result = await _completion({**self._extra, **body})
        except Exception as err:
            status = getattr(err, "status_code", None)
            if isinstance(status, int) and status >= 400:
                return _Whole(status, json.dumps({"error": {"message": str(err)}}).encode())
            raise UpstreamError("connect", f"LiteLLM call failed: {err}") from err
        if body.get("stream") is True:
            return _Stream(result)
        return _Whole(200, result.model_dump_json().encode())

    def busy_connections(self) -> int:
        return 0

    async def aclose(self) -> None:
        return None


async def _completion(kwargs: dict[str, Any]) -> Any:
    try:
        from litellm.proxy.proxy_server import llm_router
    except ImportError:  # LiteLLM as a library, without its proxy
        llm_router = None
    if llm_router is not None:
        return await llm_router.acompletion(**kwargs)
    import litellm

    return await litellm.acompletion(**kwargs)


def _error(message: str, model: Any) -> Exception:
    from litellm.exceptions import InternalServerError

    return InternalServerError(message=message, llm_provider="looprescue", model=str(model))


class LoopRescue(CustomLogger):
    """The LiteLLM callback (``rescue`` below is the instance LiteLLM's config names)."""

    def __init__(self, config: LoopRescueConfig | None = None, registry: Any = None) -> None:
        super().__init__()
        if config is None:
            config = load_config(os.environ.get("LOOPRESCUE_CONFIG") or None)
        self.service = RescueService(config, metrics_registry=registry)
        self._pending: OrderedDict[str, tuple[Rescue, LiteLLMUpstream]] = OrderedDict()

    # ------------------------------------------------------------------ on the way in

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any
    ) -> dict:
        call_id = data.get("litellm_call_id")
        if call_type not in _CHAT_CALLS or not isinstance(call_id, str):
            return data
        body = client_body(data)
        headers = (data.get("metadata") or {}).get("headers") or {}
        prepared = self.service.judge_body(OpenAIWire, headers, body)
        if prepared is None or isinstance(prepared, Rejected):
            return data  # LiteLLM and the upstream judge it, as without looprescue
        metadata = data.get("metadata")
        upstream = LiteLLMUpstream({"metadata": dict(metadata)} if metadata else {})
        rescue = await self.service.open(
            prepared,
            upstream,
            "litellm:",
            [],
            b"",
            {"adapter": "litellm"},
            adapter="litellm",
            off_loop=True,  # the history of a gateway's request may be long
        )
        if rescue.stopped is not None and rescue.loop is not None:
            # a tool loop the guard stops: LiteLLM answers with the guard's message itself
            # (a mock response: 200, streamed or whole as asked, no provider called)
            data["mock_response"] = self.service.guard.stop_text(rescue.loop, prepared.lang)
            await self.service.finished(rescue)
            return data
        if rescue.first.changed:
            data.update(rescue.first.body)  # sanitized history, a stall nudge, retry overrides
        self._pending[call_id] = (rescue, upstream)
        while len(self._pending) > PENDING_LIMIT:
            self._pending.popitem(last=False)
        return data

    # ------------------------------------------------------------------ answers

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict
    ) -> AsyncIterator[Any]:
        pending = self._pending.pop(str(request_data.get("litellm_call_id")), None)
        if pending is None or not pending[0].exchange.streaming:
            async for chunk in response:
                yield chunk
            return
        rescue, upstream = pending
        upstream.first = _Stream(response)
        try:
            answer = await rescue.answer()
            assert answer.chunks is not None
            parser = SSEParser()
            async for data in answer.chunks:
                for event in parser.feed(data):
                    if event.data.strip() == "[DONE]":
                        continue
                    chunk = json.loads(event.data)
                    if "error" in chunk:
                        message = (chunk["error"] or {}).get("message") or "upstream error"
                        raise _error(message, request_data.get("model"))
                    yield ModelResponseStream(**chunk)
        finally:
            await self.service.finished(rescue)

    async def async_post_call_success_hook(
        self, data: dict, user_api_key_dict: Any, response: Any
    ) -> Any:
        pending = self._pending.pop(str(data.get("litellm_call_id")), None)
        if (
            pending is None
            or pending[0].exchange.streaming
            or not isinstance(response, ModelResponse)
        ):
            return response
        rescue, upstream = pending
        upstream.first = _Whole(200, response.model_dump_json().encode())
        try:
            answer = await rescue.answer()
        finally:
            await self.service.finished(rescue)
        result = json.loads(answer.body)
        if answer.status != 200:
            message = (result.get("error") or {}).get("message") or f"HTTP {answer.status}"
            raise _error(message, data.get("model"))
        return ModelResponse(**result)

    async def async_post_call_failure_hook(
        self,
        request_data: dict,
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> None:
        pending = self._pending.pop(str(request_data.get("litellm_call_id")), None)
        if pending is not None:
            status = getattr(original_exception, "status_code", None)
            pending[0].first_errors.append(str(status) if status else "connect")
            await self.service.finished(pending[0])


_INSTANCE: LoopRescue | None = None


def __getattr__(name: str) -> Any:
    # ``rescue`` is made on first use, with the config named by LOOPRESCUE_CONFIG
    global _INSTANCE
    if name == "rescue":
        if _INSTANCE is None:
            _INSTANCE = LoopRescue()
        return _INSTANCE
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
