"""``ctx.state``: one agent's state as a tool sees it, typed by the agent's declared models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from chamvi._constants import STATE_KEY_MAX_LENGTH, STATE_VALUE_MAX_BYTES
from chamvi._infrastructure import bookkeeping
from chamvi.context import define_context_key
from chamvi.errors import ChamviValidationError, NotFoundError, validation_issues
from chamvi.models.state import STATE_LIST_MAX, StateItem, StatePage
from chamvi.state.store import StateStore

STATE_STORE = define_context_key("chamvi.state_store")
"""Where the worker's plugin leaves the state store for the tool runner (the knowledge index's Qdrant)."""

M = TypeVar("M", bound=BaseModel)


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key or len(key) > STATE_KEY_MAX_LENGTH:
        raise ChamviValidationError(
            f"state key {key!r} is invalid: use a non-empty string of at most "
            f"{STATE_KEY_MAX_LENGTH} characters"
        )
    return key


def _json(what: str, value: Any) -> Any:
    """``value`` as JSON data, within the size a state value may have."""
    try:
        data = to_jsonable_python(value)
    except PydanticSerializationError as error:
        raise ChamviValidationError(f"{what} is not JSON data: {error}") from None
    size = len(to_json(data))
    if size > STATE_VALUE_MAX_BYTES:
        raise ChamviValidationError(
            f"{what} is {size:,} bytes as JSON, over the limit of {STATE_VALUE_MAX_BYTES:,}: keep records "
            "small and store files as artifacts"
        )
    return data


def field_errors(error: PydanticValidationError) -> str:
    """The failing fields of a validation error, ``amount: Input should be a valid number``, no values."""
    return "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or 'value'}: {e['msg']}"
        for e in error.errors(include_input=False)
    )


class StateCollection(Generic[M]):
    """One declared collection of an agent: ``list``, ``get``, ``upsert`` (validated), ``remove``."""

    def __init__(self, store: StateStore, agent: str, name: str, model: type[M]) -> None:
        self._store = store
        self.agent = agent
        self.name = name
        self.model = model

    def _typed(self, item: StateItem) -> StateItem:
        """The stored value as the model; an item the model no longer accepts is handed back as stored."""
        try:
            return item.model_copy(update={"value": self.model.model_validate(item.value)})
        except PydanticValidationError:
            return item

    def validate(self, item: Any) -> M:
        """``item`` checked by the collection's model.

        Raises:
            ChamviValidationError: naming each field that does not fit.
        """
        try:
            return self.model.model_validate(item.model_dump() if isinstance(item, BaseModel) else item)
        except PydanticValidationError as error:
            raise ChamviValidationError(
                f"invalid item for state collection {self.name!r}: {field_errors(error)}",
                issues=validation_issues(error.errors(include_input=False)),
            ) from None

    @bookkeeping("reading the agent's state")
    async def list(
        self, *, limit: int = 20, offset: int = 0, where: Mapping[str, str | int | bool] | None = None
    ) -> StatePage:
        """A page of items, most recently written first; each value is an instance of the model.

        ``where`` keeps items whose fields equal these values (``{"customer": "ada@example.com"}``).

        Raises:
            ChamviValidationError: ``limit`` or ``offset`` is out of range, or ``where`` names no field.
        """
        if not 1 <= limit <= STATE_LIST_MAX or offset < 0:
            raise ChamviValidationError(
                f"state list of {self.name!r}: limit must be 1 to {STATE_LIST_MAX} and offset at least 0 "
                f"(got limit={limit}, offset={offset})"
            )
        unknown = sorted(set(where or {}) - set(self.model.model_fields))
        if unknown:
            raise ChamviValidationError(
                f"state list of {self.name!r}: where names {', '.join(map(repr, unknown))}, not fields of "
                f"{self.model.__name__} ({', '.join(map(repr, self.model.model_fields))})"
            )
        page = await self._store.page(self.agent, self.name, limit=limit, offset=offset, where=where)
        return page.model_copy(update={"items": [self._typed(i) for i in page.items]})

    @bookkeeping("reading the agent's state")
    async def item(self, key: str) -> StateItem | None:
        """What is stored under ``key``, with when it was written (the value as the model when it fits)."""
        item = await self._store.get(self.agent, self.name, _check_key(key))
        return self._typed(item) if item is not None else None

    @bookkeeping("reading the agent's state")
    async def get(self, key: str) -> M | None:
        """The item under ``key`` as the model, or None (also for an item the model no longer accepts)."""
        item = await self.item(key)
        return item.value if item is not None and isinstance(item.value, self.model) else None

    @bookkeeping("writing the agent's state")
    async def upsert(
        self, key: str, item: M | Mapping[str, Any], *, effect_key: str | None = None
    ) -> StateItem:
        """Validates ``item`` and stores it under ``key``, replacing what was there.

        Args:
            key: the item's key in this collection.
            item: an instance of the model, or data it accepts.
            effect_key: the effect key of the tool call writing (an effect tool's ``ctx.effect_key``),
                kept with the item so the call, redone after a crash, can tell it wrote already.

        Raises:
            ChamviValidationError: the item does not fit the model (naming the fields), or is too large.
        """
        checked = self.validate(item)
        data = _json(f"item {key!r} of state collection {self.name!r}", checked.model_dump(mode="json"))
        stored = await self._store.put(self.agent, self.name, _check_key(key), data, effect=effect_key)
        return stored.model_copy(update={"value": checked})

    @bookkeeping("writing the agent's state")
    async def remove(self, key: str) -> bool:
        """Removes the item under ``key``; answers whether it was there."""
        return await self._store.delete(self.agent, self.name, _check_key(key))

    @bookkeeping("reading the agent's state")
    async def written_by(self, key: str) -> str | None:
        """The effect key stored with the item under ``key`` (see :meth:`upsert`), if any."""
        return await self._store.written_by(self.agent, self.name, _check_key(key))


class AgentStateAccess:
    """An agent's state: key-value entries (``get``/``set``) and its declared collections.

    Shared by every run of the agent and every worker replica; a write is visible to the next read.
    """

    def __init__(self, store: StateStore, agent: str, collections: Mapping[str, type[BaseModel]]) -> None:
        self._store = store
        self.agent = agent
        self._collections = collections

    @bookkeeping("reading the agent's state")
    async def get(self, key: str, default: Any = None) -> Any:
        """The value stored under ``key`` (``None``, ``False`` and ``0`` are values), else ``default``."""
        item = await self._store.get(self.agent, None, _check_key(key))
        return default if item is None else item.value

    @bookkeeping("writing the agent's state")
    async def set(self, key: str, value: Any) -> None:
        """Stores ``value`` (JSON data, at most 256 KiB) under ``key``.

        Raises:
            ChamviValidationError: the key or value is invalid.
        """
        await self._store.put(self.agent, None, _check_key(key), _json(f"state value {key!r}", value))

    @bookkeeping("writing the agent's state")
    async def delete(self, key: str) -> bool:
        """Removes ``key``; answers whether it was there."""
        return await self._store.delete(self.agent, None, _check_key(key))

    def collection(self, name: str) -> StateCollection[Any]:
        """The declared collection ``name``.

        Raises:
            NotFoundError: the agent declares no such collection.
        """
        model = self._collections.get(name)
        if model is None:
            declared = ", ".join(repr(c) for c in self._collections) or "none"
            raise NotFoundError(
                f"unknown state collection {name!r} of agent {self.agent!r}: "
                f"declared collections are {declared}"
            )
        return StateCollection(self._store, self.agent, name, model)
