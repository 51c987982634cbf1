"""TaskSupervisor: a failing task is restarted with a capped backoff, counted, shown and
not ready until it has run healthy again; a task that returns is done."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time

import pytest

from meshpilot.supervise import TaskState, TaskSupervisor


def test_a_failing_task_is_restarted_with_a_doubling_capped_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    starts: list[float] = []

    async def flaky() -> None:
        starts.append(time.monotonic())
        if len(starts) <= 5:
            raise ValueError(f"bad input {len(starts)}")
        await asyncio.sleep(3600)

    async def scenario() -> None:
        tasks = TaskSupervisor("test", backoff_initial=0.05, backoff_max=0.2, healthy_after=0.3)
        tasks.start("flaky", flaky)
        while len(starts) < 6:
            await asyncio.sleep(0.005)
        info = tasks.infos["flaky"]
        assert (info.state, info.failures, info.restarts) == (TaskState.RUNNING, 5, 5)
        assert info.last_error == "ValueError: bad input 5"
        assert not tasks.ready  # restarted, not yet up for healthy_after
        assert 'meshpilot_task_up{task="flaky"} 0' in tasks.render_metrics()
        await asyncio.sleep(0.35)
        assert tasks.ready
        assert tasks.status()[0] | {"last_failure": None} == {
            "name": "flaky", "state": "running", "healthy": True, "failures": 5,
            "restarts": 5, "last_error": "ValueError: bad input 5", "last_failure": None,
            "retry_in_s": None,
        }  # fmt: skip
        metrics = tasks.render_metrics()
        assert 'meshpilot_task_failures_total{task="flaky"} 5\n' in metrics
        assert 'meshpilot_task_up{task="flaky"} 1\n' in metrics
        assert "# TYPE meshpilot_task_failures_total counter\n" in metrics
        await tasks.stop()

    with caplog.at_level(logging.DEBUG, "meshpilot.supervise"):
        asyncio.run(scenario())
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # 0.05, 0.1, then capped at 0.2 (not 0.4, 0.8)
    for gap, wanted in zip(gaps, [0.05, 0.1, 0.2, 0.2, 0.2], strict=True):
        assert wanted <= gap < wanted + 0.15, gaps
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors[0] == (
        "test: task flaky failed (failure 1), restarting in 0.05s: ValueError: bad input 1"
    )
    assert len(errors) == 5
    tracebacks = [r for r in caplog.records if r.levelno == logging.DEBUG and r.exc_info]
    assert len(tracebacks) == 5


def test_not_ready_while_waiting_to_restart_and_the_reason_is_shown() -> None:
    async def scenario() -> None:
        tasks = TaskSupervisor("test", backoff_initial=0.3, backoff_max=1.0, healthy_after=0.1)
        calls = 0

        async def once_broken() -> None:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise OSError("disk gone")
            await asyncio.sleep(3600)

        tasks.start("watch", once_broken)
        await asyncio.sleep(0.05)
        assert not tasks.ready
        (info,) = tasks.unhealthy()
        assert (info.state, info.retry_in, info.last_error) == (
            TaskState.RESTARTING, 0.3, "OSError: disk gone",
        )  # fmt: skip
        assert tasks.status()[0]["last_failure"].endswith("Z")
        await asyncio.sleep(0.45)  # restarted at 0.3 s, healthy 0.1 s later
        assert tasks.ready and calls == 2
        await tasks.stop()

    asyncio.run(scenario())


def test_a_task_that_returns_is_done_and_stop_cancels_the_rest() -> None:
    async def scenario() -> None:
        tasks = TaskSupervisor("test")
        cancelled = asyncio.Event()

        async def forever() -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        async def quick() -> None:
            return None

        tasks.start("forever", forever)
        tasks.start("quick", quick)
        with pytest.raises(ValueError, match="already supervised"):
            tasks.start("quick", quick)
        await asyncio.sleep(0.01)
        assert tasks.infos["quick"].state is TaskState.DONE and tasks.ready
        await tasks.stop()
        assert cancelled.is_set()

    asyncio.run(scenario())


def test_backoff_starts_again_after_a_long_healthy_run() -> None:
    starts: list[float] = []

    async def fails_after(run_for: list[float]) -> None:
        starts.append(time.monotonic())
        await asyncio.sleep(run_for.pop(0) if run_for else 3600)
        raise RuntimeError("boom")

    async def scenario() -> None:
        tasks = TaskSupervisor("test", backoff_initial=0.05, backoff_max=0.2, healthy_after=0)
        runs = [0, 0, 0.25, 0]  # two quick failures, then one after a long run
        tasks.start("t", lambda: fails_after(runs))
        while len(starts) < 5:
            await asyncio.sleep(0.005)
        await tasks.stop()

    asyncio.run(scenario())
    # waits: 0.05, 0.1, (a run of 0.25 s) 0.05 again (not 0.2), 0.1
    waits = [starts[1] - starts[0], starts[2] - starts[1], starts[3] - starts[2] - 0.25,
             starts[4] - starts[3]]  # fmt: skip
    for wait, wanted in zip(waits, [0.05, 0.1, 0.05, 0.1], strict=True):
        assert wanted <= wait < wanted + 0.12, waits  # (no reset: 0.2)
