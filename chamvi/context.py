"""Typed context keys: a tool reaches a shared instance (an API client, say) without a closure.

Values are provided on the App (``app.provide``), kept by reference, and never stored or serialised.
A worker's runtime (``chamvi.worker_state.AppRuntime``) reads them through a :class:`Provided` of its
own that adds chamvi's keys (the knowledge searcher, the state store) without writing into the App.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
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


DATA_FOLDER: ContextKey[Path] = ContextKey("chamvi.data_folder")
"""The worker's data folder (``--data``, ``CHAMVI_DATA``), for a tool that keeps files beside chamvi's:
handed over by the worker that runs with settings (``chamvi dev``, ``chamvi worker``), so no code
writes the folder into the process environment for the app to find. Unset in a worker without settings."""


class Provided:
    """The values provided for context keys, once per key.

    Args:
        parent: values read through (by reference, never copied) when this one has none for a key:
            a worker's own values stand over the App's, and the App's stay the App's.
    """

    def __init__(self, parent: Provided | None = None) -> None:
        self._values: dict[ContextKey[Any], Any] = {}
        self._parent = parent

    def provide(self, key: ContextKey[T], value: T) -> None:
        """Gives ``key`` its value, once, so no later code silently replaces what a tool relies on.

        Raises:
            InvalidAppError: ``key`` is no context key, ``value`` is None, or the key has a value already.
        """
        if not isinstance(key, ContextKey):
            raise InvalidAppError(f"{key!r} is not a context key: make one with define_context_key()")
        if value is None:
            raise InvalidAppError(f"context key {key.name!r}: provide a value, not None")
        if self.get(key) is not None:
            raise InvalidAppError(f"context key {key.name!r} already has a value")
        self._values[key] = value

    def set(self, key: ContextKey[T], value: T) -> None:
        """For chamvi's own keys, set again each time a worker's runtime opens its stores."""
        self._values[key] = value

    def get(self, key: ContextKey[T]) -> T | None:
        """The value provided for ``key`` here or in the parent, or None when nothing was."""
        value = self._values.get(key)
        if value is None and self._parent is not None:
            return self._parent.get(key)
        return value


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
