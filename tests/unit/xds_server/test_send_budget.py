"""SendBudget: the bytes of large responses handed to gRPC and not yet written, bounded over
all streams, in arrival order, never stalling for longer than its patience."""

from __future__ import annotations

import asyncio

import pytest

from meshpilot.xds import grpc_service
from meshpilot.xds.grpc_service import Outgoing, SendBudget, serialize_response


def run(coro: object) -> None:
    asyncio.run(asyncio.wait_for(coro, timeout=10))  # type: ignore[arg-type]


def test_waits_for_room_in_arrival_order() -> None:
    async def scenario() -> None:
        budget = SendBudget(limit=10)
        await budget.acquire(6)
        order: list[str] = []

        async def take(name: str, size: int) -> None:
            await budget.acquire(size)
            order.append(name)

        first = asyncio.create_task(take("first", 6))
        await asyncio.sleep(0)
        second = asyncio.create_task(take("second", 1))  # fits, but waits its turn
        await asyncio.sleep(0.01)
        assert order == [] and budget.in_flight == 6
        budget.release(6)
        await asyncio.gather(first, second)
        assert order == ["first", "second"]
        assert budget.in_flight == 7 and budget.peak == 7

    run(scenario())


def test_a_response_larger_than_the_limit_goes_alone() -> None:
    async def scenario() -> None:
        budget = SendBudget(limit=10)
        await budget.acquire(50)  # nothing in flight: it goes
        waiter = asyncio.create_task(budget.acquire(1))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        budget.release(50)
        await waiter
        assert budget.in_flight == 1

    run(scenario())


def test_a_stalled_reader_does_not_stall_everyone() -> None:
    async def scenario() -> None:
        budget = SendBudget(limit=10, patience=0.05)
        await budget.acquire(10)  # never released: a client that stopped reading
        await budget.acquire(5)  # goes after its patience
        assert budget.in_flight == 15

    run(scenario())


def test_a_stream_that_ends_while_waiting_leaves_no_trace() -> None:
    async def scenario() -> None:
        budget = SendBudget(limit=10)
        await budget.acquire(10)
        waiter = asyncio.create_task(budget.acquire(5))
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        budget.release(10)
        assert budget.in_flight == 0
        await budget.acquire(10)  # nobody is queued ahead
        assert budget.in_flight == 10

    run(scenario())


def test_the_serializer_empties_the_shell() -> None:
    out = Outgoing(b"response bytes")
    assert serialize_response(out) == b"response bytes"
    assert out.payload is None  # whoever still holds the shell no longer holds the bytes


def test_a_long_queue_keeps_its_turn_while_responses_go_out() -> None:
    async def scenario() -> None:
        budget = SendBudget(limit=10, patience=0.05)
        for _ in range(10):
            await budget.acquire(1)
        waiter = asyncio.create_task(budget.acquire(5))
        for _ in range(4):  # steady progress by others, for 3x the patience
            await asyncio.sleep(0.04)
            budget.release(1)
        assert not waiter.done() and budget.in_flight == 6
        budget.release(1)
        await waiter
        assert budget.in_flight == 10

    run(scenario())


def test_a_turn_comes_before_building_and_the_build_is_charged() -> None:
    large = grpc_service.LARGE_RESPONSE

    async def scenario() -> None:
        budget = SendBudget(limit=3 * large)
        reserve = await budget.turn()  # room: at once, a typical response's worth held
        assert reserve == large and budget.in_flight == large
        budget.admit([b"x" * (4 * large), b"small"], reserve)  # what was built goes
        assert budget.in_flight == 4 * large and budget.typical > large
        waiting = asyncio.create_task(budget.turn())
        await asyncio.sleep(0.01)
        assert not waiting.done()  # the next stream builds nothing until there is room
        budget.release(4 * large)
        assert await waiting == budget.in_flight

    run(scenario())
