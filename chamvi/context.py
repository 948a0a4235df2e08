"""Typed context keys: a tool reaches a shared instance (an API client, say) without a closure.

Values are provided on the App, kept by reference, and never stored or serialised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from chamvi.errors import ContextNotProvidedError, InvalidAppError

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class ContextKey(Generic[T]):
    """A typed name for a shared value; keys compare by identity, so two libraries never collide."""

    name: str


def define_context_key(name: str) -> ContextKey[Any]:
    """A key for ``App.provide`` and ``inject``; two keys with one name are still different keys."""
    return ContextKey(name)


class Provided:
    """The values an app provides, once per key."""

    def __init__(self) -> None:
        self._values: dict[ContextKey[Any], Any] = {}

    def provide(self, key: ContextKey[T], value: T) -> None:
        """Gives ``key`` its value, once, so no later code silently replaces what a tool relies on.

        Raises:
            InvalidAppError: ``key`` is no context key, ``value`` is None, or the key has a value already.
        """
        if not isinstance(key, ContextKey):
            raise InvalidAppError(f"{key!r} is not a context key: make one with define_context_key()")
        if value is None:
            raise InvalidAppError(f"context key {key.name!r}: provide a value, not None")
        if key in self._values:
            raise InvalidAppError(f"context key {key.name!r} already has a value")
        self._values[key] = value

    def set(self, key: ContextKey[T], value: T) -> None:
        """For chamvi's own keys, set again by each worker built for the app."""
        self._values[key] = value

    def get(self, key: ContextKey[T]) -> T | None:
        """The value provided for ``key``, or None when nothing was."""
        return self._values.get(key)


class HasProvided(Protocol):
    """A tool call's context (``ToolContext``), as far as injection needs it."""

    @property
    def provided(self) -> Provided:
        """The values the app provides."""
        ...


def try_inject(ctx: HasProvided, key: ContextKey[T]) -> T | None:
    """The value provided for ``key``, or None."""
    return ctx.provided.get(key)


def inject(ctx: HasProvided, key: ContextKey[T]) -> T:
    """The value provided for ``key``; a missing one is ``context_not_provided`` (a tool error)."""
    value = ctx.provided.get(key)
    if value is None:
        raise ContextNotProvidedError(
            f"no value provided for context key {key.name!r}: call app.provide(key, value)"
        )
    return value
