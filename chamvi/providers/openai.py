"""``openai/<model id>``: the OpenAI chat completions API and every server that speaks it.

``OPENAI_API_KEY`` authenticates; ``OPENAI_BASE_URL`` reaches Ollama, vLLM and other compatible
servers. The SDK's own retries are off: Temporal retries the model activity. An HTTP error becomes a
``ProviderUnavailableError`` (408, 409, 429, 5xx, honouring ``retry-after``; retried) or a
``ProviderHTTPError`` (other 4xx; not retried), and a connection error or timeout a
``ProviderUnavailableError``: the retry policies decide, by the error's code.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import httpx
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from chamvi.errors import ProviderHTTPError, ProviderUnavailableError, provider_http_error
from chamvi.models import ContentPart, FilePart, ImagePart, Message, ModelResponse, TextPart, ToolCall, Usage
from chamvi.providers._base import AttachedFile, ChatRequest, HostedModel, ToolSchema
from chamvi.providers._http import parse_retry_after as parse_retry_after
from chamvi.providers._openai_settings import settings_params
from chamvi.providers._streaming import FinishReason, StreamedAnswer
from chamvi.settings import openai_credentials

INVALID_JSON_KEY = "_invalid_json"
"""The key under which tool call arguments that are not JSON reach the tool (which then refuses them)."""

NON_OBJECT_KEY = "_value"
"""The key under which tool call arguments that are JSON but not an object reach the tool."""

_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/yaml", "application/x-yaml"})
"""Media types outside ``text/`` that models read best as text parts."""

# Local servers (Ollama, vLLM without --api-key) ignore the key, but the SDK insists on one.
PLACEHOLDER_KEY = "no-key"


_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}
"""The audio the Chat Completions API takes as ``input_audio`` parts."""

_NO_FILES = ChatRequest(run_id="", agent="", step=0, messages=[])


def to_wire_message(message: Message, request: ChatRequest = _NO_FILES) -> dict[str, Any]:
    """One message in the chat completions format; ``request`` holds the bytes of its parts' artifacts.

    Tool call arguments always go out as a JSON object, even when the model's own were not JSON:
    some compatible servers (Ollama among them) refuse a transcript whose arguments do not parse.
    A user message of parts goes out as parts; an assistant's as its text parts (the API takes no
    other); a tool message as text, naming its files, which :func:`to_wire_messages` sends after the
    step's tool messages. ``"openai"`` provider options of the message are added to it.
    """
    wire = _wire_message(message, request)
    wire.update(message.provider_options.get("openai", {}))
    return wire


def _wire_message(message: Message, request: ChatRequest) -> dict[str, Any]:
    if message.role == "tool":
        lines = [message.content] if message.content else []
        lines += [f"[{_name(p)} ({p.media_type or 'image'}): attached below]" for p in message.media]
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": "\n".join(lines)}
    if message.role == "assistant" and message.tool_calls:
        wire: dict[str, Any] = {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in message.tool_calls
            ],
        }
        if message.content:
            wire["content"] = _content(message, request)
        return wire
    return {"role": message.role, "content": _content(message, request)}


def _content(message: Message, request: ChatRequest) -> str | list[dict[str, Any]]:
    if not message.parts or message.role == "system":
        return message.content or ""
    parts = message.parts if message.role == "user" else [p for p in message.parts if p.type == "text"]
    return [wire_part(p, request) for p in parts]


def _name(part: ImagePart | FilePart) -> str:
    if isinstance(part, FilePart) and part.filename:
        return part.filename
    if part.artifact is not None:
        return part.artifact.filename or part.artifact.id
    return part.type


def media_part(media_type: str, name: str, data: bytes | None, url: str | None = None) -> dict[str, Any]:
    """An image or a file as a Chat Completions content part.

    Images become image parts, text text parts, WAV and MP3 audio audio parts, PDFs (and any other
    file) file parts, each inline (a data URL); by URL, an image is an image part and any other
    file a text part naming it (the API takes other files inline only).
    """
    media_type = media_type.split(";")[0].strip()
    if data is None:
        if media_type.startswith("image/"):
            return {"type": "image_url", "image_url": {"url": url or ""}}
        return {"type": "text", "text": f"{name} ({media_type}): {url}"}
    if media_type.startswith("text/") or media_type in _TEXT_TYPES:
        return {"type": "text", "text": f"{name} ({media_type}):\n{data.decode(errors='replace')}"}
    encoded = base64.b64encode(data).decode()
    if media_type in _AUDIO_FORMATS:
        return {"type": "input_audio", "input_audio": {"data": encoded, "format": _AUDIO_FORMATS[media_type]}}
    url = f"data:{media_type};base64,{encoded}"
    if media_type.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "file", "file": {"filename": name, "file_data": url}}


def wire_part(part: ContentPart, request: ChatRequest = _NO_FILES) -> dict[str, Any]:
    """One content part in the Chat Completions format, with its ``"openai"`` provider options.

    The options are added to the part (``prompt_cache_breakpoint``, ...), but ``detail`` of an image
    part goes into its ``image_url``, where the API reads it.

    Raises:
        ArtifactNotFoundError: the part references an artifact whose bytes ``request`` lacks.
    """
    if isinstance(part, TextPart):
        wire: dict[str, Any] = {"type": "text", "text": part.text}
    else:
        wire = media_part(part.media_type or "image/*", _name(part), request.data_of(part), part.url)
    options = dict(part.provider_options.get("openai", {}))
    if "detail" in options and wire["type"] == "image_url":
        wire["image_url"]["detail"] = options.pop("detail")
    wire.update(options)
    return wire


def attachment_part(attached: AttachedFile) -> dict[str, Any]:
    """One attachment as a content part, in the Chat Completions wire format (see :func:`media_part`)."""
    artifact = attached.artifact
    return media_part(artifact.media_type, artifact.filename or artifact.id, attached.data)


def to_wire_messages(request: ChatRequest) -> list[dict[str, Any]]:
    """The request's messages, with their parts; the run's first user message carries the attachments.

    A tool message takes text only, so the images and files of tool results follow the tool
    messages of their step as one user message of parts, each result's introduced by its call's id.
    """
    wire: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    trigger = request.trigger_index() if request.attachments else None
    for index, message in enumerate(request.messages):
        if pending and message.role != "tool":
            wire.append({"role": "user", "content": pending})
            pending = []
        out = to_wire_message(message, request)
        if message.role == "tool" and message.media:
            intro = f"Files of the result of tool call {message.tool_call_id}:"
            pending.append({"type": "text", "text": intro})
            pending.extend(wire_part(p, request) for p in message.media)
        if index == trigger:
            content = out["content"]
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
            out["content"] = [*parts, *(attachment_part(a) for a in request.attachments)]
        wire.append(out)
    if pending:
        wire.append({"role": "user", "content": pending})
    return wire


def to_wire_tools(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    """The agent's tools as the Chat Completions API's ``tools`` parameter."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def to_response_format(schema: dict[str, Any]) -> dict[str, Any]:
    r"""A ``json_schema`` response format named after the schema's title (OpenAI allows ``[\w-]{1,64}``)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or ""))[:64] or "output"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


def parse_arguments(raw: str | None) -> dict[str, Any]:
    """A tool call's arguments as an object; what does not parse is handed on for the tool to refuse."""
    if raw is None or not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return {INVALID_JSON_KEY: raw}
    return parsed if isinstance(parsed, dict) else {NON_OBJECT_KEY: parsed}


def _finish_reason(reason: str | None, has_calls: bool) -> FinishReason:
    if reason == "length":
        return "length"
    # Some compatible servers report "stop" with tool calls; the calls are what matters.
    if has_calls:
        return "tool_calls"
    if reason in (None, "", "stop"):
        return "stop"
    return "other"


def from_completion(completion: ChatCompletion, request: ChatRequest, ref: str) -> ModelResponse:
    """A chat completion as our provider-neutral response."""
    choices = getattr(completion, "choices", None) or []
    if not choices:
        # A plain exception: Temporal retries the call, as for any transient provider fault.
        raise RuntimeError(f"model {ref!r} answered without choices: {str(completion)[:300]}")
    choice = choices[0]
    message = choice.message
    calls: list[ToolCall] = []
    for index, wire_call in enumerate(getattr(message, "tool_calls", None) or []):
        function = getattr(wire_call, "function", None)
        if function is None:  # a custom (non-function) tool call; chamvi never declares such tools
            continue
        calls.append(
            ToolCall(
                id=getattr(wire_call, "id", None) or f"call_{request.step}_{index}",
                name=function.name,
                arguments=parse_arguments(function.arguments),
            )
        )
    content = message.content
    if content is None and not calls:
        content = getattr(message, "refusal", None)
    usage = getattr(completion, "usage", None)
    return ModelResponse(
        message=Message(role="assistant", content=content, tool_calls=calls),
        usage=Usage(
            input_tokens=(usage.prompt_tokens or 0) if usage else 0,
            output_tokens=(usage.completion_tokens or 0) if usage else 0,
        ),
        finish_reason=_finish_reason(choice.finish_reason, bool(calls)),
        response_model=getattr(completion, "model", None) or None,
        response_id=getattr(completion, "id", None) or None,
    )


def _error_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return error.message


def _seconds(timeout: object) -> str:
    return f"{timeout:g} s" if isinstance(timeout, int | float) else f"the client timeout ({timeout})"


def status_hint(status: int, key: str, url: str) -> str | None:
    """What to check after a 401, 403 or 404, naming where the provider's key and URL come from."""
    return {
        401: f"check {key}",
        403: f"check {key} and the project's access to the model",
        404: f"check the model id and {url}",
    }.get(status)


@contextlib.contextmanager
def translated_errors(
    where: str,
    timeout: object,
    *,
    service: str,
    retried_by: str,
    key: str = "OPENAI_API_KEY",
    url: str = "OPENAI_BASE_URL",
) -> Iterator[None]:
    """Turns the SDK's errors into chamvi's, one rule for chat and embeddings (``provider_http_error``).

    Each error names the model, the server and what to check (``key`` and ``url``: where the
    provider's key and base URL come from), so the person reading it can act.
    """
    try:
        yield
    except openai.APIStatusError as error:
        hint = status_hint(error.status_code, key, url)
        raise provider_http_error(
            error.status_code,
            f"{service} answered {error.status_code}: "
            f"{_error_message(error)} ({where}{'; ' + hint if hint else ''})",
            parse_retry_after(error.response.headers),
        ) from None
    except openai.APITimeoutError as error:
        raise ProviderUnavailableError(
            f"{where} did not answer within {_seconds(timeout)}; {retried_by}"
        ) from error
    except openai.APIConnectionError as error:
        cause = error.__cause__ or error
        raise ProviderUnavailableError(
            f"cannot reach {where}: {type(cause).__name__}: {cause}; check {url} and that the "
            f"server is up ({retried_by})"
        ) from error


class OpenAIChatModel(HostedModel[openai.AsyncOpenAI]):
    """One ``<provider>/<model id>`` model of the Chat Completions API (``openai/...`` by default).

    Args:
        model_id: the id the server knows the model by, e.g. ``gpt-4.1-mini`` or ``llama3.2``.
        client: the client, or a function building it on first use (so resolving a ref needs no key).
        stream: stream the answer (text and reasoning reach ``ChatRequest.on_delta`` as the model
            writes, usage comes in the last chunk); off for a server that cannot stream.
        provider: the provider's name, as refs, errors and steps name it (``ollama``).
        key: where the provider's key comes from, for error hints (``OPENAI_API_KEY``).
        url: where its base URL comes from, for error hints (``OPENAI_BASE_URL``).
        max_tokens_param: the body field ``max_output_tokens`` goes in: ``max_completion_tokens``
            (OpenAI's, which its reasoning models require) or ``max_tokens`` (what compatible
            servers read).
    """

    def __init__(
        self,
        model_id: str,
        client: openai.AsyncOpenAI | Callable[[], openai.AsyncOpenAI],
        *,
        stream: bool = True,
        provider: str = "openai",
        key: str = "OPENAI_API_KEY",
        url: str = "OPENAI_BASE_URL",
        max_tokens_param: str = "max_completion_tokens",
    ) -> None:
        super().__init__(model_id, client, stream=stream, provider=provider, key=key, url=url)
        self.max_tokens_param = max_tokens_param

    async def complete(self, request: ChatRequest) -> ModelResponse:
        """One Chat Completions call for one step of a run.

        A streamed call that fails before the model writes anything raises (and is retried); one
        that fails after answers with what was written, finish reason ``error`` and the error; one
        whose stream closes without a finish reason answers finish reason ``incomplete``.

        Raises:
            ProviderHTTPError: the server refused the request (not retried: the request is at fault).
            ProviderUnavailableError: the server could not be reached, did not answer in time, or
                answered a status worth retrying.
        """
        client = self.client
        params: dict[str, Any] = {
            "model": self.model_id,
            "messages": to_wire_messages(request),
        }
        if request.tools:
            params["tools"] = to_wire_tools(request.tools)
        if request.output_schema is not None:
            params["response_format"] = to_response_format(request.output_schema)
        params.update(settings_params(request.settings, self.max_tokens_param))
        where = f"{self.ref!r} at {client.base_url}"
        errors = translated_errors(
            where,
            client.timeout,
            service="model provider",
            retried_by="Temporal retries the call",
            key=self._key,
            url=self._url,
        )
        if not self.stream:
            with errors:
                completion = await client.post(_CHAT_PATH, body=_body(params), cast_to=ChatCompletion)
            return from_completion(completion, request, self.ref)
        answer = StreamedAnswer(request, parse_arguments, _finish_reason)
        try:
            with errors, _broken_stream(where):
                params.update(stream=True, stream_options={"include_usage": True})
                chunks = await client.post(
                    _CHAT_PATH,
                    body=_body(params),
                    cast_to=ChatCompletion,
                    stream=True,
                    stream_cls=openai.AsyncStream[ChatCompletionChunk],
                )
                async with chunks:
                    async for chunk in chunks:
                        answer.add(chunk)
        except (ProviderHTTPError, ProviderUnavailableError) as error:
            if not answer.started:
                raise
            return answer.response(error)
        return answer.response()


_CHAT_PATH = "/chat/completions"


def _body(params: dict[str, Any]) -> dict[str, Any]:
    """The request body as sent: ``params`` with ``extra_body``'s other fields merged in.

    A field the call sets itself wins over one ``extra_body`` gives (``settings_params`` refuses
    those first: this keeps a body built past it from being rewritten by its extras).

    Posted as it is rather than through ``chat.completions.create``, whose transform walks every
    message of the transcript again on each call (about 0.3 ms on a first call and 2.9 ms ten tool
    steps in, ``bench/agent_peers.py``): the body here is built from JSON-ready wire dicts already.
    """
    extra = params.pop("extra_body", None)
    return {**extra, **params} if extra else params


@contextlib.contextmanager
def _broken_stream(where: str) -> Iterator[None]:
    """A stream that broke after it began: an error event in the stream, or the connection lost.

    Either may pass if tried again, so it is retried when the model had written nothing yet.
    Status, connection and timeout errors pass on to ``translated_errors``.
    """
    try:
        yield
    except openai.APIError as error:
        if isinstance(error, openai.APIStatusError | openai.APIConnectionError):
            raise
        raise ProviderUnavailableError(f"the stream of {where} failed: {error.message}") from None
    except httpx.TransportError as error:
        raise ProviderUnavailableError(
            f"the stream of {where} broke: {type(error).__name__}: {error}"
        ) from None


def new_openai_client(api_key: str | None, base_url: str | None, timeout: float) -> openai.AsyncOpenAI | None:
    """A client with the SDK's retries off (Temporal retries), from the arguments or the environment.

    Returns None when no key is set for OpenAI's own API; a base URL alone, such as a local Ollama,
    gets a placeholder key.
    """
    env_key, env_url = openai_credentials()
    api_key = api_key or env_key
    base_url = base_url or env_url
    if not api_key:
        if base_url is None:
            return None
        api_key = PLACEHOLDER_KEY
    return openai.AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)


MISSING_KEY = (
    "OPENAI_API_KEY is not set: export it, or set OPENAI_BASE_URL to a compatible server that needs "
    "no key (Ollama, vLLM)"
)


class LazyOpenAIClient:
    """One ``AsyncOpenAI`` client, built on first use, so resolving a model ref needs no key.

    Args:
        api_key: defaults to ``OPENAI_API_KEY``; with a ``base_url`` and no key, a placeholder is sent
            (Ollama and vLLM without ``--api-key`` accept any).
        base_url: defaults to ``OPENAI_BASE_URL``, else the OpenAI API.
        timeout: seconds one HTTP request may take.
        client: a ready client instead (its retries are turned off all the same).
    """

    default_timeout = 110.0

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        *,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout if timeout is not None else self.default_timeout
        self._client = client.with_options(max_retries=0) if client is not None else None

    def _missing_key(self) -> Exception:
        return ProviderHTTPError(401, f"model provider answered 401: {MISSING_KEY}")

    def client(self) -> openai.AsyncOpenAI:
        """The shared client; raises a 401 error (not retried) when no key is set for OpenAI's API."""
        if self._client is None:
            self._client = new_openai_client(self._api_key, self._base_url, self._timeout)
            if self._client is None:
                raise self._missing_key()
        return self._client


class OpenAIProvider(LazyOpenAIClient):
    """Serves every ``openai/...`` chat ref; its HTTP timeout (110 s) stays below the model activity's.

    Attributes:
        name: the provider's name, before the slash of its refs.
        stream: whether its models stream their answers; set it to False for a compatible server
            that cannot stream.
    """

    name = "openai"
    stream = True
    max_tokens_param = "max_completion_tokens"
    key_source = "OPENAI_API_KEY"
    url_source = "OPENAI_BASE_URL"

    def model(self, model_id: str) -> OpenAIChatModel:
        """The registry's factory for ``<name>/<model_id>``; builds no client yet."""
        return OpenAIChatModel(
            model_id,
            self.client,
            stream=self.stream,
            provider=self.name,
            key=self.key_source,
            url=self.url_source,
            max_tokens_param=self.max_tokens_param,
        )
