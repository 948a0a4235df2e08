"""``RunSlots`` alone: at most N runs at once, one run's calls share its slot, first come first served."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from chamvi._run_slots import DEFAULT_MAX_RUNS, RunSlots
from chamvi.errors import InvalidAppError


async def enter(slots: RunSlots, run_id: str, inside: list[str], leave: asyncio.Event) -> None:
    async with slots.slot(run_id):
        inside.append(run_id)
        await leave.wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_runs_past_the_limit_wait_in_order_and_one_runs_calls_share_its_slot() -> None:
    slots = RunSlots(2)
    inside: list[str] = []
    gates = {name: asyncio.Event() for name in ("a", "b", "c", "d")}
    tasks = [asyncio.ensure_future(enter(slots, run, inside, gates[run])) for run in ("a", "b", "c", "d")]
    again = asyncio.ensure_future(enter(slots, "a", inside, gates["a"]))  # a second call of run a
    await settle()
    assert (inside, slots.executing, slots.waiting) == (["a", "b", "a"], 2, 2)

    gates["b"].set()
    await settle()
    assert inside == ["a", "b", "a", "c"] and slots.waiting == 1
    gates["a"].set()  # both calls of a end: its slot goes to d
    await settle()
    assert inside[-1] == "d" and slots.executing == 2
    gates["c"].set()
    gates["d"].set()
    await asyncio.gather(*tasks, again)
    assert (slots.executing, slots.waiting, slots.peak) == (0, 0, 2)


async def test_a_call_cancelled_while_it_waits_gives_up_its_place() -> None:
    slots = RunSlots(1)
    inside: list[str] = []
    hold, never = asyncio.Event(), asyncio.Event()
    first = asyncio.ensure_future(enter(slots, "a", inside, hold))
    cancelled = asyncio.ensure_future(enter(slots, "b", inside, never))
    later = asyncio.ensure_future(enter(slots, "c", inside, hold))
    await settle()
    cancelled.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await cancelled
    hold.set()
    await asyncio.gather(first, later)
    assert inside == ["a", "c"] and slots.executing == 0


def test_the_limit_is_a_positive_whole_number_and_four_by_default() -> None:
    assert RunSlots().limit == DEFAULT_MAX_RUNS == 4
    for bad in (0, -1, 2.5, True):
        with pytest.raises(InvalidAppError, match="max_runs must be a positive whole number"):
            RunSlots(bad)  # type: ignore[arg-type]
