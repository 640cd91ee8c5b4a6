"""looprescue inside the LiteLLM proxy: the history of each chat completion, ``/v1/messages``
and ``/v1/responses`` call is sanitized on the way in and its answer, streamed or whole, rescued
with the proxy's engine.

Two spellings in LiteLLM's ``config.yaml``: the guardrail :class:`LoopRescueGuardrail` (LiteLLM's
guardrail controls say where it runs, per key, team and request, and ``looprescue`` settings in
their metadata change its config), or the callback ``rescue`` (every request)::

    litellm_settings:
      callbacks: looprescue.integrations.litellm.rescue

``LOOPRESCUE_CONFIG`` may name a looprescue YAML config (default: the defaults). The hooks, the
same in both (``LiteLLMRescue``):

* ``async_pre_call_hook``: judges the request (the same rules as the proxy) and starts its
  engine, whose first request is the client's, sanitized (and nudged or steered when due):
  LiteLLM sends that one; a request the tool-loop guard stops is answered by LiteLLM with the
  guard's message as a mock response, the provider never called;
* ``async_post_call_streaming_iterator_hook`` / ``async_post_call_success_hook``: the answer
  LiteLLM got is fed to the exchange as the upstream's response; a continuation after a cut is
  sent through LiteLLM's own router (same model group, keys and fallbacks), and what the client
  gets is the exchange's output in the form LiteLLM gave the answer (its chunk and response
  types for chat completions and ``/v1/responses``, the provider's SSE bytes and dict for
  ``/v1/messages``);
* ``async_post_call_failure_hook``: a request that failed is counted and forgotten.

Counters go to prometheus-client's default registry, which LiteLLM's own ``/metrics`` serves
when its ``prometheus`` callback is on.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..extras import missing_extra

try:
    from litellm.integrations.custom_guardrail import CustomGuardrail
    from litellm.integrations.custom_logger import CustomLogger
    from litellm.types.guardrails import GuardrailEventHooks
    from litellm.types.llms.openai import ResponsesAPIResponse
    from litellm.types.utils import ModelResponse, ModelResponseStream
except ModuleNotFoundError as exc:
    raise (missing_extra(exc, "looprescue.integrations.litellm") or exc) from None

from ..config import ConfigError, LoopRescueConfig, config_from_mapping, load_config
from ..exchange.upstream import UpstreamError
from ..proxy.service import Rejected, Rescue, RescueService
from ..wire import jsonfast
from ..wire.anthropic import AnthropicWire
from ..wire.base import Wire
from ..wire.openai import OpenAIWire
from ..wire.responses import ResponsesWire
from ..wire.sse import SSEEvent, SSEParser

# requests started and not answered yet (their answers come in a later hook); bounded so a
# request whose answer hook never runs cannot hold memory forever
PENDING_LIMIT = 4096
# configs made from per-key, per-team or per-request settings kept at once
SERVICES_LIMIT = 64
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
_JSON_TYPES = (str, int, float, bool, list, dict, type(None))
_METADATA_KEYS = ("metadata", "litellm_metadata")


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
    """LiteLLM's stream of chunks as the upstream response the exchange reads (SSE bytes).

    Chat completions and ``/v1/responses`` come as LiteLLM's chunk objects, written out as
    ``data:`` lines (chat's ending in ``[DONE]``); ``/v1/messages`` comes as the provider's SSE
    bytes, passed on as they are."""

    status = 200
    headers: Sequence[tuple[str, str]] = ()

    def __init__(self, chunks: AsyncIterator[Any], route: _Route) -> None:
        self._chunks = chunks.__aiter__()
        self._route = route
        self._ended = False

    async def next_chunk(self) -> bytes:
        if self._ended:
            return b""
        try:
            chunk = await self._chunks.__anext__()
        except StopAsyncIteration:
            self._ended = True
            return self._route.done
        except Exception as err:
            raise UpstreamError("broken", f"LiteLLM stream failed: {err}") from err
        if isinstance(chunk, bytes | bytearray):
            return bytes(chunk)
        if isinstance(chunk, str):
            return chunk.encode()
        return self._route.frame(chunk)

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


@dataclass(frozen=True)
class _Route:
    """How one LiteLLM call type is rescued: its wire, how a continuation is sent through
    LiteLLM, and how answers are spelled in LiteLLM's hooks."""

    wire: type[Wire]
    call: Callable[[dict[str, Any]], Awaitable[Any]]
    done: bytes  # what ends a stream after LiteLLM's last chunk
    # one of LiteLLM's chunk objects as the SSE bytes the exchange reads
    frame: Callable[[Any], bytes]
    # one event of the exchange's output as the chunk object LiteLLM writes out to the client
    # (None when there is nothing to send); a route without it yields the exchange's SSE
    # bytes, which LiteLLM passes on as they are
    chunk: Callable[[SSEEvent, Any], Any] | None
    # the exchange's whole answer as the response LiteLLM returns
    whole: Callable[[dict[str, Any]], Any]
    # request fields LiteLLM's own hooks may rewrite after ours ran: a continuation sends
    # what LiteLLM sent, not what the client did
    rewritten: tuple[str, ...] = ()

    def whole_payload(self, response: Any) -> bytes | None:
        if isinstance(response, ModelResponse | ResponsesAPIResponse):
            return response.model_dump_json().encode()
        if isinstance(response, Mapping):
            return json.dumps(response).encode()
        return None


def _data_frame(chunk: Any) -> bytes:
    # chat chunks go to the decoder as the provider sent them, nulls and all
    return b"data: " + chunk.model_dump_json().encode() + b"\n\n"


def _chat_chunk(event: SSEEvent, model: Any) -> Any:
    if event.data.strip() == "[DONE]":
        return None  # LiteLLM ends the stream with its own
    chunk = json.loads(event.data)
    if "error" in chunk:
        raise _error(_error_message(chunk, "upstream error"), model)
    return ModelResponseStream(**chunk)


def _responses_frame(chunk: Any) -> bytes:
    # as LiteLLM writes the event to its own clients: no unset fields, no nulls
    data = chunk.model_dump_json(exclude_none=True, exclude_unset=True)
    return b"data: " + data.encode() + b"\n\n"


def _responses_chunk(event: SSEEvent, model: Any) -> Any:
    # a failed response is an event of the stream (``response.failed``), not an exception
    return _responses_event(json.loads(event.data))


def _responses_event(data: dict[str, Any]) -> Any:
    """A Responses API stream event as LiteLLM's own object for its type, as LiteLLM makes it
    from a provider's event (an event type it does not know becomes its generic event)."""
    from litellm.llms.openai.responses.transformation import OpenAIResponsesAPIConfig
    from pydantic import ValidationError

    kind = OpenAIResponsesAPIConfig.get_event_model_class(event_type=str(data.get("type")))
    try:
        return kind(**data)
    except ValidationError:
        return kind.model_construct(**data)


async def _completion(kwargs: dict[str, Any]) -> Any:
    router = _router()
    if router is not None:
        return await router.acompletion(**kwargs)
    import litellm

    return await litellm.acompletion(**kwargs)


async def _messages(kwargs: dict[str, Any]) -> Any:
    router = _router()
    if router is not None:
        return await router.aanthropic_messages(**kwargs)
    import litellm

    return await litellm.anthropic_messages(**kwargs)


async def _responses(kwargs: dict[str, Any]) -> Any:
    router = _router()
    if router is not None:
        return await router.aresponses(**kwargs)
    import litellm

    return await litellm.aresponses(**kwargs)


def _router() -> Any:
    try:
        from litellm.proxy.proxy_server import llm_router
    except ImportError:  # LiteLLM as a library, without its proxy
        return None
    return llm_router


_CHAT = _Route(
    OpenAIWire,
    _completion,
    b"data: [DONE]\n\n",
    _data_frame,
    _chat_chunk,
    lambda result: ModelResponse(**result),
)
_MESSAGES = _Route(AnthropicWire, _messages, b"", _data_frame, None, lambda result: result)
# a Responses stream ends with its ``response.completed`` event; LiteLLM adds ``[DONE]``
_RESPONSES = _Route(
    ResponsesWire,
    _responses,
    b"",
    _responses_frame,
    _responses_chunk,
    lambda result: ResponsesAPIResponse(**result),
    # the chained response's id the client has is LiteLLM's encrypted one; LiteLLM's response
    # id hook decrypts it in the request, and only there
    rewritten=("previous_response_id",),
)
# LiteLLM's call types and the routes that rescue them
ROUTES: Mapping[str, _Route] = {
    "completion": _CHAT,
    "acompletion": _CHAT,
    "anthropic_messages": _MESSAGES,
    "responses": _RESPONSES,
    "aresponses": _RESPONSES,
}


class LiteLLMUpstream:
    """The exchange's upstream: the response LiteLLM already has for the first request, and
    LiteLLM's router (or litellm itself outside the proxy) for continuations."""

    def __init__(self, route: _Route, extra: Mapping[str, Any], request: Mapping[str, Any]) -> None:
        self.route = route
        self.first: Any = None
        self._extra = dict(extra)  # LiteLLM fields a continuation carries (its metadata)
        self._request = request  # LiteLLM's request data, as its later hooks leave it

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
        for field in self.route.rewritten:
            if field in body and field in self._request:
                body[field] = self._request[field]
        try:
            result = await self.route.call({**self._extra, **body})
        except Exception as err:
            status = getattr(err, "status_code", None)
            if isinstance(status, int) and status >= 400:
                return _Whole(status, json.dumps({"error": {"message": str(err)}}).encode())
            raise UpstreamError("connect", f"LiteLLM call failed: {err}") from err
        if body.get("stream") is True:
            return _Stream(result, self.route)
        payload = self.route.whole_payload(result)
        if payload is None:
            raise UpstreamError("malformed", f"LiteLLM answered with {type(result).__name__}")
        return _Whole(200, payload)

    def busy_connections(self) -> int:
        return 0

    async def aclose(self) -> None:
        return None


def _error(message: str, model: Any) -> Exception:
    from litellm.exceptions import InternalServerError

    return InternalServerError(message=message, llm_provider="looprescue", model=str(model))


def _error_message(payload: Mapping[str, Any], fallback: str) -> str:
    error = payload.get("error")
    message = error.get("message") if isinstance(error, Mapping) else None
    return message if isinstance(message, str) and message else fallback


@dataclass
class _Pending:
    rescue: Rescue
    upstream: LiteLLMUpstream
    service: RescueService


class LiteLLMRescue:
    """The rescue of LiteLLM's calls, shared by the callback and the guardrail: one service
    (conversation state, history cache, metrics) and the requests whose answers are due."""

    def __init__(self, config: LoopRescueConfig | None = None, registry: Any = None) -> None:
        if config is None:
            config = load_config(os.environ.get("LOOPRESCUE_CONFIG") or None)
        self.service = RescueService(config, metrics_registry=registry)
        self._registry = registry
        # services of configs that settings changed (per key, team or request), sharing the
        # base service's state; few distinct settings exist, and they are bounded anyway
        self._services: OrderedDict[str, RescueService] = OrderedDict()
        self._pending: OrderedDict[str, _Pending] = OrderedDict()

    def service_for(self, settings: Mapping[str, Any]) -> RescueService:
        """The service of the base config with ``settings`` on top (raises ConfigError)."""
        if not settings:
            return self.service
        token = json.dumps(settings, sort_keys=True, default=str)
        service = self._services.get(token)
        if service is None:
            merged = _deep_merge(self.service.config.model_dump(), settings)
            config = config_from_mapping(merged, "looprescue settings")
            service = RescueService(
                config,
                self.service.store,
                detector_factory=self.service.detector_factory,
                history=self.service.history,
                metrics_registry=self._registry,
            )
            self._services[token] = service
            while len(self._services) > SERVICES_LIMIT:
                self._services.popitem(last=False)
        self._services.move_to_end(token)
        return service

    async def pre_call(
        self, data: dict, call_type: Any, settings: Mapping[str, Any] | None = None
    ) -> dict:
        call_id = data.get("litellm_call_id")
        route = ROUTES.get(str(call_type))
        if route is None or not isinstance(call_id, str):
            return data
        service = self.service_for(settings or {})
        body = client_body(data)
        # LiteLLM keeps its own metadata (the request's headers, the key's) in ``metadata``
        # for chat and in ``litellm_metadata`` for ``/v1/messages`` and ``/v1/responses``,
        # whose ``metadata`` is the client's own request field
        own = data.get("litellm_metadata") or data.get("metadata") or {}
        headers = (own.get("headers") or {}) if isinstance(own, Mapping) else {}
        prepared = service.judge_body(route.wire, headers, body)
        if prepared is None or isinstance(prepared, Rejected):
            return data  # LiteLLM and the upstream judge it, as without looprescue
        # a continuation carries both, so LiteLLM counts it against the same key
        extra = {k: dict(data[k]) for k in _METADATA_KEYS if isinstance(data.get(k), Mapping)}
        upstream = LiteLLMUpstream(route, extra, data)
        rescue = await service.open(
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
            data["mock_response"] = service.guard.stop_text(rescue.loop, prepared.lang)
            await service.finished(rescue)
            return data
        if rescue.first.changed:
            data.update(rescue.first.body)  # sanitized history, a stall nudge, retry overrides
        self._pending[call_id] = _Pending(rescue, upstream, service)
        while len(self._pending) > PENDING_LIMIT:
            self._pending.popitem(last=False)
        return data

    async def stream(self, response: Any, request_data: dict) -> AsyncIterator[Any]:
        pending = self._pending.pop(str(request_data.get("litellm_call_id")), None)
        if pending is None or not pending.rescue.exchange.streaming:
            async for chunk in response:
                yield chunk
            return
        rescue, upstream = pending.rescue, pending.upstream
        route = upstream.route
        upstream.first = _Stream(response, route)
        try:
            answer = await rescue.answer()
            assert answer.chunks is not None
            if route.chunk is None:
                async for data in answer.chunks:  # the provider's SSE, as the client reads it
                    yield data
                return
            parser = SSEParser()
            async for data in answer.chunks:
                for event in parser.feed(data):
                    chunk = route.chunk(event, request_data.get("model"))
                    if chunk is not None:
                        yield chunk
        finally:
            await pending.service.finished(rescue)

    async def success(self, data: dict, response: Any) -> Any:
        pending = self._pending.pop(str(data.get("litellm_call_id")), None)
        if pending is None or pending.rescue.exchange.streaming:
            return response
        rescue, upstream = pending.rescue, pending.upstream
        payload = upstream.route.whole_payload(response)
        if payload is None:
            await pending.service.finished(rescue)
            return response  # a shape the route does not know: left as LiteLLM made it
        upstream.first = _Whole(200, payload)
        try:
            answer = await rescue.answer()
        finally:
            await pending.service.finished(rescue)
        result = json.loads(answer.body)
        if answer.status != 200:
            raise _error(_error_message(result, f"HTTP {answer.status}"), data.get("model"))
        rescued = upstream.route.whole(result)
        # LiteLLM's proxy writes its response headers (model id, api base, cost, the
        # provider's rate limits) from the returned object's hidden params
        hidden = getattr(response, "_hidden_params", None)
        if hidden and hasattr(rescued, "_hidden_params"):
            rescued._hidden_params = {**hidden, **(rescued._hidden_params or {})}
        return rescued

    async def failure(self, request_data: dict, original_exception: Exception) -> None:
        pending = self._pending.pop(str(request_data.get("litellm_call_id")), None)
        if pending is not None:
            status = getattr(original_exception, "status_code", None)
            pending.rescue.first_errors.append(str(status) if status else "connect")
            await pending.service.finished(pending.rescue)


def _deep_merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


class LoopRescue(CustomLogger):
    """The LiteLLM callback (``rescue`` below is the instance LiteLLM's config names): every
    chat completion, ``/v1/messages`` and ``/v1/responses`` call is rescued."""

    def __init__(self, config: LoopRescueConfig | None = None, registry: Any = None) -> None:
        super().__init__()
        self.core = LiteLLMRescue(config, registry)
        self.service = self.core.service

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any
    ) -> dict:
        return await self.core.pre_call(data, call_type)

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict
    ) -> AsyncIterator[Any]:
        async for chunk in self.core.stream(response, request_data):
            yield chunk

    async def async_post_call_success_hook(
        self, data: dict, user_api_key_dict: Any, response: Any
    ) -> Any:
        return await self.core.success(data, response)

    async def async_post_call_failure_hook(
        self,
        request_data: dict,
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> None:
        await self.core.failure(request_data, original_exception)


class LoopRescueGuardrail(CustomGuardrail):
    """looprescue as a LiteLLM guardrail: LiteLLM's own guardrail controls say which requests it
    runs on (``default_on``, a key's or team's guardrails, a request's ``guardrails`` list or
    ``disable_global_guardrail``), and ``looprescue`` settings in the team's, the key's and the
    request's metadata change its config for that request, in that order (a request's
    ``{"looprescue": {"mode": "observe"}}``; ``{"enabled": false}`` turns it off).

    In LiteLLM's ``config.yaml``::

        guardrails:
          - guardrail_name: looprescue
            litellm_params:
              guardrail: looprescue.integrations.litellm.LoopRescueGuardrail
              mode: [pre_call, post_call]
              default_on: true

    Its hooks repeat the callback's rather than come from a shared base: LiteLLM looks for an
    overriding streaming hook in the class's own namespace, not in its bases.
    """

    def __init__(
        self, config: LoopRescueConfig | None = None, registry: Any = None, **kwargs: Any
    ) -> None:
        kwargs.setdefault("guardrail_name", "looprescue")
        kwargs.setdefault(
            "event_hook", [GuardrailEventHooks.pre_call, GuardrailEventHooks.post_call]
        )
        super().__init__(**kwargs)
        self.core = LiteLLMRescue(config, registry)
        self.service = self.core.service

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any
    ) -> dict:
        if not self.should_run_guardrail(data, GuardrailEventHooks.pre_call):
            return data
        settings = request_settings(user_api_key_dict, data)
        if settings.pop("enabled", True) is False:
            return data
        try:
            return await self.core.pre_call(data, call_type, settings)
        except ConfigError as err:
            raise _bad_settings(str(err)) from None

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict
    ) -> AsyncIterator[Any]:
        async for chunk in self.core.stream(response, request_data):
            yield chunk

    async def async_post_call_success_hook(
        self, data: dict, user_api_key_dict: Any, response: Any
    ) -> Any:
        return await self.core.success(data, response)

    async def async_post_call_failure_hook(
        self,
        request_data: dict,
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> None:
        await self.core.failure(request_data, original_exception)


SETTINGS_KEY = "looprescue"


def request_settings(user_api_key_dict: Any, data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``looprescue`` settings of the team, then the key, then the request (later wins);
    a value that is not a mapping is a mistake named in the error."""
    merged: dict[str, Any] = {}
    sources = (
        ("team metadata", getattr(user_api_key_dict, "team_metadata", None)),
        ("key metadata", getattr(user_api_key_dict, "metadata", None)),
        ("request metadata", data.get("metadata")),
    )
    for where, metadata in sources:
        if not isinstance(metadata, Mapping) or metadata.get(SETTINGS_KEY) is None:
            continue
        settings = metadata[SETTINGS_KEY]
        if not isinstance(settings, Mapping):
            raise _bad_settings(f"{where}: {SETTINGS_KEY}: must be a mapping of config keys")
        merged = _deep_merge(merged, settings)
    return merged


def _bad_settings(message: str) -> Exception:
    from fastapi import HTTPException

    return HTTPException(status_code=400, detail={"error": f"looprescue: {message}"})


_INSTANCE: LoopRescue | None = None


def __getattr__(name: str) -> Any:
    # ``rescue`` is made on first use, with the config named by LOOPRESCUE_CONFIG
    global _INSTANCE
    if name == "rescue":
        if _INSTANCE is None:
            _INSTANCE = LoopRescue()
        return _INSTANCE
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
