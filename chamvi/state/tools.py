"""The tools the model gets for each state collection: ``state_<name>_list``, ``_upsert``, ``_remove``.

They are ordinary tools (the agent's tool policy, permissions, hooks and trust cover them) that read
``ctx.state``. Upsert and remove are effect tools: a call whose result was recorded never writes again,
and an upsert redone after a crash finds its own write by the effect key stored with the item.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from chamvi.tools import Tool, ToolContext, effect_tool, tool

_LIST = (
    "Lists the items of the state collection {name!r} (what this agent remembers across runs), most "
    "recently written first: key, value and when it was written. Up to `limit` items (at most 100) "
    "from `offset`; `next_offset` asks for the next page."
)
_UPSERT = (
    "Stores an item in the state collection {name!r} under `key`, replacing the item stored under that "
    "key. The item must fit the collection's schema; it is remembered across runs."
)


def _upsert_result(key: str, item: Any) -> dict[str, Any]:
    return {"key": key, "item": item, "stored": True}


def _list_tool(name: str) -> Tool:
    async def list_items(ctx: ToolContext, limit: int = 20, offset: int = 0) -> dict[str, Any]:
        page = await ctx.state.collection(name).list(limit=limit, offset=offset)
        return page.model_dump(mode="json")

    list_items.__annotations__ = {"ctx": ToolContext, "limit": int, "offset": int, "return": dict}
    return tool(name=f"state_{name}_list", description=_LIST.format(name=name))(list_items)


def _upsert_tool(name: str, model: type[BaseModel]) -> Tool:
    async def upsert(key: str, item: Any, ctx: ToolContext) -> dict[str, Any]:
        stored = await ctx.state.collection(name).upsert(key, item, effect_key=ctx.effect_key)
        return _upsert_result(key, stored.value)

    async def already_applied(effect: str, arguments: Any, ctx: ToolContext) -> dict[str, Any] | None:
        collection = ctx.state.collection(name)
        if await collection.written_by(arguments.key) != effect:
            return None
        return _upsert_result(arguments.key, await collection.get(arguments.key))

    upsert.__annotations__ = {"key": str, "item": model, "ctx": ToolContext, "return": dict}
    return effect_tool(
        name=f"state_{name}_upsert", description=_UPSERT.format(name=name), already_applied=already_applied
    )(upsert)


def _remove_tool(name: str) -> Tool:
    async def remove(key: str, ctx: ToolContext) -> dict[str, Any]:
        return {"key": key, "removed": await ctx.state.collection(name).remove(key)}

    async def already_applied(_effect: str, arguments: Any, ctx: ToolContext) -> dict[str, Any] | None:
        # nothing under the key: nothing to remove, whether it never was or a crashed attempt removed it
        if await ctx.state.collection(name).item(arguments.key) is None:
            return {"key": arguments.key, "removed": False}
        return None

    remove.__annotations__ = {"key": str, "ctx": ToolContext, "return": dict}
    return effect_tool(
        name=f"state_{name}_remove",
        description=f"Removes the item stored under `key` from the state collection {name!r}.",
        already_applied=already_applied,
    )(remove)


def state_tools(collections: Mapping[str, type[BaseModel]]) -> list[Tool]:
    """The three tools of each collection, in the order the collections are declared."""
    return [
        made
        for name, model in collections.items()
        for made in (_list_tool(name), _upsert_tool(name, model), _remove_tool(name))
    ]
