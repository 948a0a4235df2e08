"""Resolves model refs: an exact registration first, then the provider named before the slash."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from chamvi.errors import ModelNotFoundError
from chamvi.providers._base import ChatModel

ProviderFactory = Callable[[str], ChatModel]


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
    from chamvi.providers.local import LocalChatModel
    from chamvi.providers.openai import OpenAIProvider

    return ModelRegistry(providers={"openai": OpenAIProvider().model, "local": LocalChatModel})
