"""Debounce: bursts merge into one push, max delay bounds the wait, one push at a time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.xds.debounce import Debouncer
from meshpilot.xds.push_request import PushRequest, request_for_change


def vs(name: str) -> ConfigKey:
    return ConfigKey(Kind.VIRTUAL_SERVICE, "default", name)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), timeout=10))


class Recorder:
    def __init__(self, delay: float = 0.0, fail_first: bool = False) -> None:
        self.pushes: list[tuple[float, PushRequest]] = []
        self.delay = delay
        self.fail_first = fail_first

    async def __call__(self, req: PushRequest) -> None:
        self.pushes.append((time.monotonic(), req))
        if self.fail_first and len(self.pushes) == 1:
            raise RuntimeError("push failed")
        await asyncio.sleep(self.delay)


async def _started(debouncer: Debouncer) -> asyncio.Task[None]:
    task = asyncio.create_task(debouncer.run())
    await asyncio.sleep(0)
    return task


def test_a_burst_becomes_one_push_with_every_change() -> None:
    async def scenario() -> None:
        pushes = Recorder()
        debouncer = Debouncer(pushes, after=0.1, max_delay=5)
        task = await _started(debouncer)
        for i in range(5):
            debouncer.enqueue(request_for_change(frozenset({vs(f"r{i}")})))
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        task.cancel()
        assert len(pushes.pushes) == 1
        req = pushes.pushes[0][1]
        assert req.configs_updated == {vs(f"r{i}") for i in range(5)}
        assert req.full and debouncer.events == 5 and debouncer.pushes == 1

    run(scenario)


def test_push_waits_for_quiet_time() -> None:
    async def scenario() -> None:
        pushes = Recorder()
        debouncer = Debouncer(pushes, after=0.15, max_delay=5)
        task = await _started(debouncer)
        start = time.monotonic()
        debouncer.enqueue(PushRequest())
        await asyncio.sleep(0.1)
        debouncer.enqueue(PushRequest())  # restarts the quiet time
        await asyncio.sleep(0.4)
        task.cancel()
        assert len(pushes.pushes) == 1
        assert pushes.pushes[0][0] - start >= 0.24

    run(scenario)


def test_max_delay_bounds_a_never_ending_burst() -> None:
    async def scenario() -> None:
        pushes = Recorder()
        debouncer = Debouncer(pushes, after=0.1, max_delay=0.3)
        task = await _started(debouncer)
        start = time.monotonic()
        while time.monotonic() - start < 0.6:
            debouncer.enqueue(PushRequest())
            await asyncio.sleep(0.02)
        task.cancel()
        assert pushes.pushes, "max_delay must force a push during the burst"
        assert pushes.pushes[0][0] - start < 0.45

    run(scenario)


def test_one_push_in_flight_and_changes_meanwhile_are_merged() -> None:
    async def scenario() -> None:
        pushes = Recorder(delay=0.3)
        debouncer = Debouncer(pushes, after=0.02, max_delay=5)
        task = await _started(debouncer)
        debouncer.enqueue(request_for_change(frozenset({vs("a")})))
        await asyncio.sleep(0.1)  # the first push is running now
        debouncer.enqueue(request_for_change(frozenset({vs("b")})))
        await asyncio.sleep(0.05)
        debouncer.enqueue(request_for_change(frozenset({vs("c")})))
        await asyncio.sleep(0.7)
        task.cancel()
        assert [p[1].configs_updated for p in pushes.pushes] == [
            {vs("a")},
            {vs("b"), vs("c")},
        ]
        assert pushes.pushes[1][0] - pushes.pushes[0][0] >= 0.29

    run(scenario)


def test_endpoint_only_changes_stay_eds_until_merged_with_config() -> None:
    pod = ConfigKey(Kind.POD, "default", "web-1")
    eds = request_for_change(frozenset({pod}))
    assert not eds.full and eds.reasons == {"endpoint"}
    merged = eds.merge(request_for_change(frozenset({vs("a")})))
    assert merged.full and merged.reasons == {"endpoint", "config"}
    assert merged.start == min(eds.start, merged.start)


def test_a_failed_push_does_not_stop_later_ones() -> None:
    async def scenario() -> None:
        pushes = Recorder(fail_first=True)
        debouncer = Debouncer(pushes, after=0.02, max_delay=5)
        task = await _started(debouncer)
        debouncer.enqueue(PushRequest())
        await asyncio.sleep(0.1)
        debouncer.enqueue(PushRequest())
        await asyncio.sleep(0.1)
        task.cancel()
        assert len(pushes.pushes) == 2

    run(scenario)


def test_a_request_with_its_own_quiet_window_is_pushed_after_it() -> None:
    async def scenario() -> None:
        pushes = Recorder()
        debouncer = Debouncer(pushes, after=1.0, max_delay=5)
        task = await _started(debouncer)
        start = time.monotonic()
        debouncer.enqueue(request_for_change(frozenset({vs("whole-write")})), quiet=0.01)
        await asyncio.sleep(0.2)
        assert len(pushes.pushes) == 1, "a whole store write waited for the 1 s window"
        assert pushes.pushes[0][0] - start < 0.15
        # a burst with a request of the ordinary window waits for the longer one
        debouncer.enqueue(request_for_change(frozenset({vs("a")})), quiet=0.01)
        debouncer.enqueue(request_for_change(frozenset({vs("b")})))
        await asyncio.sleep(0.3)
        assert len(pushes.pushes) == 1
        await asyncio.sleep(1.0)
        task.cancel()
        assert len(pushes.pushes) == 2
        assert pushes.pushes[1][1].configs_updated == {vs("a"), vs("b")}

    run(scenario)


def test_due_once_the_quiet_window_or_the_max_delay_has_passed() -> None:
    now = [0.0]
    debouncer = Debouncer(Recorder(), after=0.1, max_delay=0.25, clock=lambda: now[0])
    assert not debouncer.due()  # nothing pending
    debouncer.enqueue(request_for_change(frozenset({vs("a")})))
    now[0] = 0.09
    assert not debouncer.due()
    debouncer.enqueue(request_for_change(frozenset({vs("b")})))  # the window starts again
    now[0] = 0.15
    assert not debouncer.due()
    now[0] = 0.19
    assert debouncer.due()
    debouncer.enqueue(request_for_change(frozenset({vs("c")})))
    now[0] = 0.25  # 0.06 of quiet only, but the burst began 0.25 ago
    assert debouncer.due()
