"""The embedding calls of a pass in flight: sent as soon as one ends, landed in the order sent."""

from __future__ import annotations

import asyncio

from chamvi.knowledge._window import EmbeddingWindow


async def _answer(gate: asyncio.Event, vector: float) -> list[list[float]]:
    await gate.wait()
    return [[vector]]


async def test_a_call_that_ends_before_an_older_one_makes_room_and_vectors_still_land_in_order() -> None:
    window = EmbeddingWindow(2)
    gates = [asyncio.Event() for _ in range(3)]
    window.send(_answer(gates[0], 0.0))
    window.send(_answer(gates[1], 1.0))
    assert window.full
    gates[1].set()  # the younger call ends first
    await window.wait()
    assert not window.full and not window.ready
    window.send(_answer(gates[2], 2.0))
    assert window.full
    for gate in (gates[2], gates[0]):
        gate.set()
    assert [await window.land() for _ in range(3)] == [[[0.0]], [[1.0]], [[2.0]]]


async def test_the_window_holds_the_vectors_of_at_most_twice_its_calls() -> None:
    window = EmbeddingWindow(2)
    oldest = asyncio.Event()
    window.send(_answer(oldest, 0.0))
    done = asyncio.Event()
    done.set()
    for vector in (1.0, 2.0, 3.0):
        window.send(_answer(done, vector))
    await asyncio.sleep(0)
    assert window.full and not window.ready  # three ended, one in flight: but four are held
    waiting = asyncio.ensure_future(window.wait())
    await asyncio.sleep(0)
    assert not waiting.done()  # it waits for the oldest, not for any call
    oldest.set()
    await waiting
    assert window.ready
    await window.close()
