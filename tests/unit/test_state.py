"""Agent state without Temporal: definitions, ``ctx.state`` over Qdrant's in-memory local mode."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel
from qdrant_client import AsyncQdrantClient

from chamvi import AgentState, InvalidAgentDefinitionError, define_agent, tool
from chamvi.errors import ChamviValidationError, InvalidInputError, NotFoundError
from chamvi.state import AgentStateAccess, StateStore
from chamvi.state.store import state_point_id
from chamvi.tools import ToolContext


class Refund(BaseModel):
    customer: str
    amount: float


@pytest.fixture
async def state() -> AsyncIterator[AgentStateAccess]:
    client = AsyncQdrantClient(location=":memory:")
    yield AgentStateAccess(StateStore(client), "support", {"refunds": Refund})
    await client.close()


async def test_a_listing_pages_every_item_once_newest_first(state: AgentStateAccess) -> None:
    refunds = state.collection("refunds")
    for i in range(5):
        await refunds.upsert(f"A-{i}", Refund(customer="ada" if i % 2 else "grace", amount=i))

    first = await refunds.list(limit=2)
    rest = await refunds.list(limit=10, offset=first.next_offset or 0)
    # written within the same second: local mode answers the later write first
    assert [i.key for i in first.items] == ["A-4", "A-3"]
    assert [i.key for i in rest.items] == ["A-2", "A-1", "A-0"] and rest.next_offset is None
    assert first.items[0].value == Refund(customer="grace", amount=4)
    adas = await refunds.list(where={"customer": "ada"})
    assert [i.key for i in adas.items] == ["A-3", "A-1"]


async def test_a_page_of_large_values_stops_before_it_outgrows_one_payload() -> None:
    client = AsyncQdrantClient(location=":memory:")
    store = StateStore(client)
    state = AgentStateAccess(store, "support", {})
    for i in range(5):  # each near the largest value an entry may have
        await state.set(f"note-{i}", "x" * 200_000)
    pages, offset = [], 0
    while True:
        page = await store.page("support", None, limit=5, offset=offset)
        pages.append([item.key for item in page.items])
        if page.next_offset is None:
            break
        offset = page.next_offset
    await client.close()
    assert [len(keys) for keys in pages] == [2, 2, 1]
    assert sorted(k for keys in pages for k in keys) == [f"note-{i}" for i in range(5)]


async def test_an_upsert_is_validated_naming_the_field_and_stores_nothing(state: AgentStateAccess) -> None:
    refunds = state.collection("refunds")
    refused_item = r"^invalid item for state collection 'refunds': amount"
    with pytest.raises(ChamviValidationError, match=refused_item) as refused:
        await refunds.upsert("A-1", {"customer": "ada", "amount": "a lot"})
    assert [(i.path, i.where) for i in refused.value.issues] == [(("amount",), "amount")]
    assert await refunds.get("A-1") is None


async def test_the_same_key_is_one_point_so_a_retried_write_overwrites_itself(
    state: AgentStateAccess,
) -> None:
    refunds = state.collection("refunds")
    await refunds.upsert("A-1", Refund(customer="ada", amount=1), effect_key="run-1:state_refunds_upsert:x")
    await refunds.upsert("A-1", Refund(customer="ada", amount=1), effect_key="run-1:state_refunds_upsert:x")
    assert (await refunds.list()).items[0].key == "A-1"
    assert len((await refunds.list()).items) == 1
    assert await refunds.written_by("A-1") == "run-1:state_refunds_upsert:x"
    assert state_point_id("support", "refunds", "A-1") == state_point_id("support", "refunds", "A-1")
    assert state_point_id("support", "refunds", "A-1") != state_point_id("support", None, "A-1")
    assert await refunds.remove("A-1") is True
    assert await refunds.remove("A-1") is False


async def test_key_value_entries_keep_falsy_values_and_refuse_what_is_no_json(
    state: AgentStateAccess,
) -> None:
    await state.set("zero", 0)
    await state.set("nothing", None)
    assert await state.get("zero", "missing") == 0
    assert await state.get("nothing", "missing") is None
    assert await state.get("never", "missing") == "missing"
    with pytest.raises(ChamviValidationError, match="state value 'x' is not JSON data"):
        await state.set("x", object())
    with pytest.raises(ChamviValidationError, match="over the limit of 262,144"):
        await state.set("big", "x" * 300_000)
    with pytest.raises(ChamviValidationError, match="state key '' is invalid"):
        await state.set("", 1)


async def test_bad_listings_and_unknown_collections_say_what_is_wrong(state: AgentStateAccess) -> None:
    with pytest.raises(NotFoundError, match="unknown state collection 'refnds' of agent 'support': declared"):
        state.collection("refnds")
    with pytest.raises(ChamviValidationError, match="where names 'who', not fields of Refund"):
        await state.collection("refunds").list(where={"who": "ada"})
    with pytest.raises(ChamviValidationError, match="limit must be 1 to 100"):
        await state.collection("refunds").list(limit=500)


def test_state_collections_get_three_tools_and_their_names_are_checked() -> None:
    agent = define_agent(name="keeper", model="local/demo", instructions="x", state={"refunds": Refund})
    assert list(agent.tools) == ["state_refunds_list", "state_refunds_upsert", "state_refunds_remove"]
    assert [agent.tools[n].effect is not None for n in agent.tools] == [False, True, True]
    with pytest.raises(InvalidAgentDefinitionError, match="state collection name 'Refunds' is invalid"):
        define_agent(name="keeper", model="local/demo", instructions="x", state={"Refunds": Refund})
    with pytest.raises(InvalidAgentDefinitionError, match="'refunds' must map to a pydantic model class"):
        define_agent(name="keeper", model="local/demo", instructions="x", state={"refunds": dict})  # type: ignore[dict-item]

    @tool(name="state_refunds_list")
    def clash() -> str:
        """Takes a generated tool's name."""
        return ""

    with pytest.raises(InvalidAgentDefinitionError, match="a tool is named 'state_refunds_list'"):
        define_agent(
            name="keeper",
            model="local/demo",
            instructions="x",
            tools=[clash],
            state=AgentState({"refunds": Refund}),
        )


def test_a_tool_context_built_by_hand_has_no_state_and_says_so() -> None:
    ctx = ToolContext.__new__(ToolContext)
    ctx.state_access = None
    with pytest.raises(InvalidInputError, match="this context has no agent state"):
        _ = ctx.state
