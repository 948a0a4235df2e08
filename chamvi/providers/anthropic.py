"""``anthropic/<model id>``: Anthropic's Messages API through the official ``anthropic`` SDK.

``ANTHROPIC_API_KEY`` authenticates and ``ANTHROPIC_BASE_URL`` reaches another endpoint, read as the
SDK reads them (through ``chamvi.settings``, when the first call is made). Answers stream: text and
thinking reach ``ChatRequest.on_delta`` as the model writes, tool calls are joined from their
``input_json_delta`` fragments, the answer's id and model and its input usage (cache reads and
writes included) come with ``message_start``, its output usage with ``message_delta``. Structured
output goes as ``output_config.format``.

The SDK's own retries are off: Temporal retries the model activity, by the rule of the ``openai``
provider. An HTTP error becomes a ``ProviderUnavailableError`` (408, 409, 429, 5xx and Anthropic's
529 ``overloaded_error``, honouring ``retry-after``; retried) or a ``ProviderHTTPError`` (other 4xx;
not retried). An ``error`` event in the stream counts as the status its type stands for
(``overloaded_error`` 529, ``rate_limit_error`` 429, ``invalid_request_error`` 400, ...): before the
model wrote anything it is raised (and retried if that status is), after it the step answers
finish reason ``error`` with what was written, as a broken OpenAI stream does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2

from chamvi.errors import (
    ChamviError,
    ProviderHTTPError,
    ProviderUnavailableError,
    provider_http_error,
)
from chamvi.models import ErrorInfo, Message, ModelResponse, ModelSettings, ToolCall, Usage
from chamvi.providers import _anthropic_wire as wire
from chamvi.providers._base import ChatRequest, HostedModel
from chamvi.providers._http import parse_retry_after
from chamvi.providers.openai import PLACEHOLDER_KEY, parse_arguments, status_hint
from chamvi.settings import anthropic_credentials, read_variable

DEFAULT_MAX_TOKENS = 8192
"""``max_tokens`` of a call whose settings give no ``max_output_tokens`` (the API requires one)."""

STREAM_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""The HTTP status each of Anthropic's error types stands for, for an ``error`` event in a stream."""

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


@dataclass
class _Block:
    type: str
    text: list[str] = field(default_factory=list)
    json: list[str] = field(default_factory=list)
    id: str | None = None
    name: str = ""
    input: dict[str, Any] | None = None
    signature: str | None = None
    data: str | None = None


class AnthropicAnswer:
    """The answer of one Messages call, put together from stream events (or a whole message)."""

    def __init__(self, request: ChatRequest) -> None:
        self._request = request
        self._blocks: dict[int, _Block] = {}
        self.stop_reason: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.model: str | None = None
        """The model that answered, as the API names it (``message_start``'s, or the whole message's)."""
        self.id: str | None = None
        """The API's id of the answer (``msg_...``)."""
        self.started = False
        """Whether the model has written anything yet: a failure before it is retried, after it not."""

    def message(self, message: Any) -> None:
        """A ``message_start``'s message, or a whole message: who answered, its id, the input usage."""
        self.model = getattr(message, "model", None) or self.model
        self.id = getattr(message, "id", None) or self.id
        self._usage(getattr(message, "usage", None))

    def _usage(self, usage: Any) -> None:
        if usage is None:
            return
        inputs = [getattr(usage, f, None) for f in ("input_tokens", "cache_creation_input_tokens")]
        inputs.append(getattr(usage, "cache_read_input_tokens", None))
        if any(isinstance(n, int) for n in inputs):
            self.input_tokens = sum(n for n in inputs if isinstance(n, int))
        if isinstance(getattr(usage, "output_tokens", None), int):
            self.output_tokens = usage.output_tokens

    def _delta(self, kind: str, text: str) -> None:
        self.started = True
        if text and self._request.on_delta is not None:
            self._request.on_delta("text" if kind == "text" else "reasoning", text)

    def start_block(self, index: int, block: Any) -> None:
        """A ``content_block_start``, or one block of a whole message."""
        kind = getattr(block, "type", "")
        started = _Block(type=kind, id=getattr(block, "id", None), name=getattr(block, "name", "") or "")
        self._blocks[index] = started
        if kind == "tool_use":
            self.started = True
            raw_input = getattr(block, "input", None)
            started.input = raw_input if isinstance(raw_input, dict) else None
        elif kind == "redacted_thinking":
            started.data = getattr(block, "data", None)
        elif kind in ("text", "thinking"):
            text = getattr(block, kind, "") or ""
            if text:
                started.text.append(text)
                self._delta(kind, text)
            started.signature = getattr(block, "signature", None) or None

    def add(self, event: Any) -> None:
        """Takes one stream event (``ping`` and ``error`` events never get here: the SDK takes them)."""
        kind = getattr(event, "type", "")
        if kind == "message_start":
            self.message(event.message)
        elif kind == "content_block_start":
            self.start_block(event.index, event.content_block)
        elif kind == "content_block_delta":
            block = self._blocks.setdefault(event.index, _Block(type="text"))
            delta = event.delta
            if delta.type == "text_delta":
                block.text.append(delta.text)
                self._delta("text", delta.text)
            elif delta.type == "input_json_delta":
                self.started = True
                block.json.append(delta.partial_json)
            elif delta.type == "thinking_delta":
                block.text.append(delta.thinking)
                self._delta("thinking", delta.thinking)
            elif delta.type == "signature_delta":
                block.signature = (block.signature or "") + delta.signature
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self._usage(event.usage)

    def response(self, error: ChamviError | None = None) -> ModelResponse:
        """The step's response: finished, broken by ``error``, or incomplete (no stop reason)."""
        texts: list[str] = []
        calls: list[ToolCall] = []
        thinking: list[dict[str, Any]] = []
        for index, block in sorted(self._blocks.items()):
            if block.type == "text":
                texts.append("".join(block.text))
            elif block.type == "tool_use" and block.name:
                arguments = parse_arguments("".join(block.json)) if block.json else dict(block.input or {})
                call_id = block.id or f"call_{self._request.step}_{index}"
                calls.append(ToolCall(id=call_id, name=block.name, arguments=arguments))
            elif block.type == "thinking":
                text = "".join(block.text)
                thinking.append({"type": "thinking", "thinking": text, "signature": block.signature or ""})
            elif block.type == "redacted_thinking" and block.data:
                thinking.append({"type": "redacted_thinking", "data": block.data})
        message = Message(
            role="assistant",
            content="".join(texts) or None,
            tool_calls=calls,
            provider_options={wire.PROVIDER_OPTIONS_KEY: {wire.THINKING_KEY: thinking}} if thinking else {},
        )
        usage = Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens)
        answered = ModelResponse(message=message, usage=usage, response_model=self.model, response_id=self.id)
        if error is not None:
            info = ErrorInfo(code=error.code, message=error.message)
            return answered.model_copy(update={"finish_reason": "error", "error": info})
        if self.stop_reason is None:
            return answered.model_copy(update={"finish_reason": "incomplete"})
        finish = "tool_calls" if calls else _FINISH.get(self.stop_reason, "other")
        if self.stop_reason == "model_context_window_exceeded":
            finish = "length"
        return answered.model_copy(update={"finish_reason": finish})


def _error_message(error: anthropic.APIStatusError) -> str:
    if error.api_message:
        return error.api_message
    body = error.body
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return error.message


@contextlib.contextmanager
def translated_errors(where: str, timeout: object, *, key: str, url: str) -> Iterator[None]:
    """The SDK's errors as chamvi's, by the rule of :func:`chamvi.errors.provider_http_error`."""
    try:
        yield
    except anthropic.APIStatusError as error:
        if error.status_code < 400:  # an error event inside a stream that began 200
            status = STREAM_ERROR_STATUS.get(error.type or "", 500)
            raise provider_http_error(
                status,
                f"the stream of {where} failed: {error.type or 'error'}: {_error_message(error)}",
            ) from None
        hint = status_hint(error.status_code, key, url)
        raise provider_http_error(
            error.status_code,
            f"model provider answered {error.status_code}: {_error_message(error)} "
            f"({where}{'; ' + hint if hint else ''})",
            parse_retry_after(error.response.headers),
        ) from None
    except anthropic.APITimeoutError as error:
        seconds = f"{timeout:g} s" if isinstance(timeout, int | float) else "the client timeout"
        raise ProviderUnavailableError(
            f"{where} did not answer within {seconds}; Temporal retries the call"
        ) from error
    except anthropic.APIConnectionError as error:
        cause = error.__cause__ or error
        raise ProviderUnavailableError(
            f"cannot reach {where}: {type(cause).__name__}: {cause}; check {url} and that the server is up "
            "(Temporal retries the call)"
        ) from error
    except httpx2.TransportError as error:
        raise ProviderUnavailableError(
            f"the stream of {where} broke: {type(error).__name__}: {error}"
        ) from None


class AnthropicChatModel(HostedModel[anthropic.AsyncAnthropic]):
    """One ``anthropic/<model id>`` model (``claude-sonnet-4-5``, ...).

    Args:
        model_id: the model's id at Anthropic.
        client: the client, or a function building it on first use (so resolving a ref needs no key).
        stream: stream the answer; off for an endpoint that cannot.
        provider: the provider's name, as refs, errors and steps name it.
        key: where its key comes from, for error hints.
        url: where its base URL comes from, for error hints.
        max_tokens: ``max_tokens`` when the settings give no ``max_output_tokens``.
    """

    def __init__(
        self,
        model_id: str,
        client: anthropic.AsyncAnthropic | Callable[[], anthropic.AsyncAnthropic],
        *,
        stream: bool = True,
        provider: str = "anthropic",
        key: str = "ANTHROPIC_API_KEY",
        url: str = "ANTHROPIC_BASE_URL",
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        super().__init__(model_id, client, stream=stream, provider=provider, key=key, url=url)
        self.max_tokens = max_tokens

    def refused_settings(self, settings: ModelSettings) -> list[str]:
        """What the Messages API cannot do of ``settings``; the App refuses an agent asking for it.

        That is ``seed``, a temperature above 1, and the efforts ``none`` and ``minimal``.
        """
        return wire.refused_settings(settings)

    def params(self, request: ChatRequest) -> dict[str, Any]:
        """The ``messages.create`` parameters of one call, without ``stream``."""
        system, messages = wire.to_anthropic(request)
        params: dict[str, Any] = {"model": self.model_id, "messages": messages}
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = wire.to_anthropic_tools(request.tools)
        params.update(wire.settings_params(request.settings, self.max_tokens))
        if request.output_schema is not None:
            schema = anthropic.transform_schema(request.output_schema)
            output_format = {"type": "json_schema", "schema": schema}
            params["output_config"] = {**params.get("output_config", {}), "format": output_format}
        return params

    async def complete(self, request: ChatRequest) -> ModelResponse:
        """One Messages call for one step of a run (see the module docstring for streams and errors).

        Raises:
            ProviderHTTPError: the API refused the request (not retried: the request is at fault).
            ProviderUnavailableError: the API could not be reached, did not answer in time, or
                answered a status worth retrying.
        """
        client = self.client
        params = self.params(request)
        where = f"{self.ref!r} at {client.base_url}"
        errors = translated_errors(where, client.timeout, key=self._key, url=self._url)
        answer = AnthropicAnswer(request)
        if not self.stream:
            with errors:
                whole = await client.messages.create(**params)
            answer.stop_reason = whole.stop_reason
            answer.message(whole)
            for index, block in enumerate(whole.content):
                answer.start_block(index, block)
            return answer.response()
        try:
            with errors:
                events = await client.messages.create(**params, stream=True)
                async with events:
                    async for event in events:
                        answer.add(event)
        except (ProviderHTTPError, ProviderUnavailableError) as error:
            if not answer.started:
                raise
            return answer.response(error)
        return answer.response()


def as_chamvi_calls_it(client: anthropic.AsyncAnthropic) -> anthropic.AsyncAnthropic:
    """A copy of ``client`` without the SDK's retries (Temporal retries the call) nor its own spans.

    The SDK makes an ``anthropic.messages.create`` span for each call, with ``gen_ai.operation.name``
    ``chat`` and the call's token usage: beside chamvi's ``chat`` span, a backend would count every
    call and its tokens twice. chamvi's span has what the SDK's has that the conventions name
    (``gen_ai.response.id``, ``gen_ai.response.model``, the usage), and the agent and run beside.
    The trace context still goes with each request, as the client's ``propagation`` says.
    """
    telemetry = client.open_telemetry
    spans_off = {**telemetry, "traces": {**telemetry["traces"], "enabled": False}}
    return client.with_options(max_retries=0, open_telemetry=spans_off)  # type: ignore[arg-type]


class AnthropicProvider:
    """Serves ``anthropic/...`` refs (or ``<name>/...``) from one client, built on first use.

    Args:
        api_key: the key; else the variable ``api_key_env`` names; else ``ANTHROPIC_API_KEY``.
        base_url: the endpoint; else ``ANTHROPIC_BASE_URL``; else Anthropic's API.
        timeout: seconds one HTTP request may take (110 s, below the model activity's 120 s).
        name: the provider's name, before the slash of its refs.
        api_key_env: the variable holding the key (a second Anthropic account under another name).
        stream: stream answers.
        max_tokens: ``max_tokens`` of a call whose settings give no ``max_output_tokens``.
        client: a ready client instead (its retries and spans are turned off all the same).
    """

    default_timeout = 110.0

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        *,
        name: str = "anthropic",
        api_key_env: str | None = None,
        stream: bool = True,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        self.name = name
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout if timeout is not None else self.default_timeout
        self.api_key_env = api_key_env
        self.stream = stream
        self.max_tokens = max_tokens
        self._client = as_chamvi_calls_it(client) if client is not None else None

    @property
    def key_source(self) -> str:
        """Where the key comes from, as error hints name it."""
        return self.api_key_env or "ANTHROPIC_API_KEY"

    def client(self) -> anthropic.AsyncAnthropic:
        """The shared client, with the SDK's retries and spans off (:func:`as_chamvi_calls_it`).

        Raises:
            ProviderHTTPError: 401 (not retried) when no key is set for Anthropic's own API.
        """
        if self._client is None:
            env_key, env_url = anthropic_credentials()
            if self.api_key_env is not None:
                env_key = read_variable(self.api_key_env)
            api_key = self._api_key or env_key
            base_url = self._base_url or env_url
            if not api_key:
                if base_url is None or self.api_key_env is not None:
                    raise ProviderHTTPError(
                        401,
                        f"model provider {self.name!r} answered 401: {self.key_source} is not set: export it",
                    )
                api_key = PLACEHOLDER_KEY  # a gateway that takes no key
            built = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, timeout=self._timeout)
            self._client = as_chamvi_calls_it(built)
        return self._client

    def model(self, model_id: str) -> AnthropicChatModel:
        """The registry's factory for ``<name>/<model_id>``; builds no client yet."""
        return AnthropicChatModel(
            model_id,
            self.client,
            stream=self.stream,
            provider=self.name,
            key=self.key_source,
            url="ANTHROPIC_BASE_URL" if self._base_url is None else f"the base_url of provider {self.name!r}",
            max_tokens=self.max_tokens,
        )
