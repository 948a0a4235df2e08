"""Named OpenAI-compatible endpoints: ``ollama/...``, ``vllm/...`` beside ``openai/...``.

``openai_compatible("ollama", base_url="http://localhost:11434/v1")`` in ``App(models=[...])``, or
the same entry in ``CHAMVI_PROVIDERS`` (``chamvi.settings``), serves ``ollama/<model id>`` refs
through the Chat Completions API, with the ``openai`` provider's streaming, wire format and error
rule; the provider's name is in every ref, error and step.
"""

from __future__ import annotations

import openai

from chamvi.errors import InvalidAppError, ProviderHTTPError
from chamvi.providers.openai import PLACEHOLDER_KEY, OpenAIProvider
from chamvi.settings import provider_name_problem, read_variable


class OpenAICompatibleProvider(OpenAIProvider):
    """A named OpenAI-compatible endpoint (Ollama, vLLM, llama.cpp, LM Studio, a gateway).

    It never reads ``OPENAI_API_KEY`` nor ``OPENAI_BASE_URL``: its key and URL are its own, so the
    OpenAI key never reaches another server. Build it with :func:`openai_compatible`.
    """

    max_tokens_param = "max_tokens"

    def __init__(
        self,
        name: str,
        base_url: str,
        *,
        api_key: str | None = None,
        api_key_env: str | None = None,
        timeout: float | None = None,
        stream: bool = True,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        super().__init__(api_key, base_url, timeout, client=client)
        self.name = name
        self.stream = stream
        self.api_key_env = api_key_env
        self.key_source = api_key_env or f"the api_key of provider {name!r}"
        self.url_source = f"the base_url of provider {name!r} ({base_url})"

    def client(self) -> openai.AsyncOpenAI:
        """The shared client: the key given, else the variable named ``api_key_env``, else none.

        Raises:
            ProviderHTTPError: 401 (not retried) when ``api_key_env`` names a variable that is unset.
        """
        if self._client is None:
            api_key = self._api_key
            if api_key is None and self.api_key_env is not None:
                api_key = read_variable(self.api_key_env)
                if api_key is None:
                    raise ProviderHTTPError(
                        401,
                        f"model provider {self.name!r} answered 401: {self.api_key_env} is not set: export "
                        "it (CHAMVI_PROVIDERS names it as the provider's api_key_env)",
                    )
            self._client = openai.AsyncOpenAI(
                api_key=api_key or PLACEHOLDER_KEY,
                base_url=self._base_url,
                max_retries=0,
                timeout=self._timeout,
            )
        return self._client


def openai_compatible(
    name: str,
    *,
    base_url: str,
    api_key: str | None = None,
    api_key_env: str | None = None,
    timeout: float | None = None,
    stream: bool = True,
) -> OpenAICompatibleProvider:
    """A provider named ``name`` for an OpenAI-compatible endpoint: its models are ``<name>/<model>``.

    Give it to ``App(models=[...])`` beside others (``openai_compatible("vllm", ...)``); the same
    entries can come from ``CHAMVI_PROVIDERS``. ``max_output_tokens`` goes out as ``max_tokens``,
    the field compatible servers read.

    Args:
        name: the provider's name (lowercase letters, digits, ``.``, ``_``, ``-``).
        base_url: the endpoint, up to its ``/v1`` (``http://localhost:11434/v1``).
        api_key: the key; else the variable ``api_key_env`` names (read at first use); else none
            is needed (a placeholder is sent: Ollama and vLLM without ``--api-key`` accept any).
        api_key_env: the environment variable holding the key.
        timeout: seconds one HTTP request may take (110 s by default, below the model activity's).
        stream: stream answers; False for a server that cannot.

    Raises:
        InvalidAppError: the name or the URL cannot work.
    """
    problem = provider_name_problem(name)
    if problem is not None:
        raise InvalidAppError(problem)
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise InvalidAppError(f"provider {name!r}: base_url {base_url!r} must be an http:// or https:// URL")
    return OpenAICompatibleProvider(
        name, base_url, api_key=api_key, api_key_env=api_key_env, timeout=timeout, stream=stream
    )
