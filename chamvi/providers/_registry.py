"""Resolves model refs: an exact registration first, then the provider named before the slash."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, runtime_checkable

from chamvi.errors import ModelNotFoundError
from chamvi.providers._base import ChatModel
from chamvi.settings import ProviderConfig, configured_providers

ProviderFactory = Callable[[str], ChatModel]


@runtime_checkable
class NamedProvider(Protocol):
    """A provider that serves ``<name>/<model id>`` refs, given to ``App(models=[...])``.

    ``openai_compatible(...)``, ``AnthropicProvider()``, or one of your own.
    """

    @property
    def name(self) -> str: ...

    def model(self, model_id: str) -> ChatModel: ...


class ModelRegistry:
    def __init__(
        self,
        providers: Mapping[str, ProviderFactory] | None = None,
        models: Mapping[str, ChatModel] | None = None,
    ) -> None:
        self._providers: dict[str, ProviderFactory] = dict(providers or {})
        self._models: dict[str, ChatModel] = dict(models or {})

    def register_provider(self, provider: str, factory: ProviderFactory) -> None:
        self._providers[provider] = factory

    def add(self, provider: NamedProvider) -> None:
        """Serves ``<provider.name>/<model id>`` refs with ``provider.model``."""
        self._providers[provider.name] = provider.model

    @classmethod
    def of(cls, providers: Iterable[ModelRegistry | NamedProvider]) -> ModelRegistry:
        """One registry of named providers and registries, later ones winning on a name."""
        registry = cls()
        for item in providers:
            if isinstance(item, ModelRegistry):
                registry = registry.merged(item)
            else:
                registry.add(item)
        return registry

    @property
    def provider_names(self) -> list[str]:
        """The names of the providers it serves, sorted."""
        return sorted(self._providers)

    def register(self, ref: str, model: ChatModel) -> None:
        """Registers one model under an exact ref, e.g. ``scripted/triage`` in a test."""
        self._models[ref] = model

    def merged(self, other: ModelRegistry) -> ModelRegistry:
        return ModelRegistry(
            providers={**self._providers, **other._providers}, models={**self._models, **other._models}
        )

    def resolve(self, ref: str) -> ChatModel:
        model = self._models.get(ref)
        if model is not None:
            return model
        provider, _, model_id = ref.partition("/")
        factory = self._providers.get(provider)
        if factory is None or not model_id:
            known = ", ".join(repr(p + "/...") for p in sorted(self._providers)) or "none"
            raise ModelNotFoundError(
                f"model {ref!r} does not resolve: known providers are {known}"
                + (f", models {', '.join(repr(m) for m in sorted(self._models))}" if self._models else "")
            )
        model = factory(model_id)
        self._models[ref] = model
        return model


def default_registry() -> ModelRegistry:
    """``openai/...``, ``anthropic/...`` and ``local/...``, each building no client until a call."""
    from chamvi.providers.anthropic import AnthropicProvider
    from chamvi.providers.local import LocalChatModel
    from chamvi.providers.openai import OpenAIProvider

    return ModelRegistry(
        providers={
            "openai": OpenAIProvider().model,
            "anthropic": AnthropicProvider().model,
            "local": LocalChatModel,
        }
    )


def provider_of(config: ProviderConfig) -> NamedProvider:
    """The provider one ``CHAMVI_PROVIDERS`` entry describes."""
    if config.api == "anthropic":
        from chamvi.providers.anthropic import AnthropicProvider

        return AnthropicProvider(
            base_url=config.base_url,
            timeout=config.timeout,
            name=config.name,
            api_key_env=config.api_key_env,
            stream=config.stream,
        )
    from chamvi.providers.compatible import OpenAICompatibleProvider

    assert config.base_url is not None  # parse_providers requires it for this api
    return OpenAICompatibleProvider(
        config.name,
        config.base_url,
        api_key_env=config.api_key_env,
        timeout=config.timeout,
        stream=config.stream,
    )


def environment_registry(configs: Iterable[ProviderConfig] | None = None) -> ModelRegistry:
    """The providers of ``CHAMVI_PROVIDERS`` (``configs`` instead, when given), as a registry.

    Raises:
        ChamviValidationError: the variable is malformed.
    """
    return ModelRegistry.of(provider_of(c) for c in (configured_providers() if configs is None else configs))
