"""Long-lived asyncio tasks that never die silently: each failure is logged, counted and
shown, and the task is started again after a capped backoff.

    tasks = TaskSupervisor("discovery")
    tasks.start("config-watch", store.watch)  # a factory: every restart calls it anew
    tasks.ready                # False while a task waits to restart or has not yet stayed
                               # up `healthy_after` seconds since its restart
    tasks.status()             # /debug/tasks: state, failures, restarts, last error
    tasks.render_metrics()     # meshpilot_task_failures_total{task}, meshpilot_task_up{task}
    await tasks.stop()         # cancel them all, wait for them

A failure is one log line at ERROR with the exception (`discovery: task config-watch failed
(failure 1), restarting in 0.5s: ValueError: ...`); the traceback follows at DEBUG.
Backoff doubles from `backoff_initial` up to `backoff_max` and starts again from the
bottom after a run that lasted `backoff_max`. A task that returns is done (not restarted,
not a failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["TaskInfo", "TaskState", "TaskSupervisor", "report_task_failure"]

log = logging.getLogger(__name__)

TaskFactory = Callable[[], Awaitable[Any]]


class TaskState(StrEnum):
    RUNNING = "running"
    RESTARTING = "restarting"  # failed; waiting out the backoff
    DONE = "done"  # returned on its own


@dataclass(slots=True)
class TaskInfo:
    """What /debug/tasks shows of one task."""

    name: str
    state: TaskState = TaskState.RUNNING
    failures: int = 0
    restarts: int = 0
    last_error: str | None = None
    last_failure: float | None = None  # wall-clock time of the last failure
    started: float = 0.0  # monotonic time of the current run
    retry_in: float | None = None  # while restarting: the backoff being waited out

    def healthy(self, now: float, healthy_after: float) -> bool:
        if self.state is TaskState.RESTARTING:
            return False
        return self.restarts == 0 or now - self.started >= healthy_after

    def to_json(self, now: float, healthy_after: float) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": str(self.state),
            "healthy": self.healthy(now, healthy_after),
            "failures": self.failures,
            "restarts": self.restarts,
            "last_error": self.last_error,
            "last_failure": _rfc3339(self.last_failure),
            "retry_in_s": self.retry_in,
        }


class TaskSupervisor:
    def __init__(
        self,
        component: str,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        healthy_after: float = 1.0,
    ) -> None:
        self.component = component  # logged with each failure: "discovery", "agent", ...
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.healthy_after = healthy_after
        self.infos: dict[str, TaskInfo] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, name: str, factory: TaskFactory) -> asyncio.Task[None]:
        """Run `factory()` under supervision as the task `name` (names are unique)."""
        if name in self._tasks:
            raise ValueError(f"a task named {name!r} is already supervised")
        info = self.infos[name] = TaskInfo(name, started=time.monotonic())
        task = asyncio.create_task(self._keep(info, factory), name=name)
        self._tasks[name] = task
        return task

    @property
    def ready(self) -> bool:
        now = time.monotonic()
        return all(info.healthy(now, self.healthy_after) for info in self.infos.values())

    def unhealthy(self) -> list[TaskInfo]:
        now = time.monotonic()
        return [i for i in self.infos.values() if not i.healthy(now, self.healthy_after)]

    def status(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [self.infos[n].to_json(now, self.healthy_after) for n in sorted(self.infos)]

    def render_metrics(self) -> str:
        return "".join(f"{line}\n" for line in self._metric_lines())

    def _metric_lines(self) -> Iterator[str]:
        names = sorted(self.infos)
        yield "# HELP meshpilot_task_failures_total Failures of a background task (restarted)."
        yield "# TYPE meshpilot_task_failures_total counter"
        for name in names:
            yield f'meshpilot_task_failures_total{{task="{name}"}} {self.infos[name].failures}'
        yield "# HELP meshpilot_task_up 1 while a background task runs healthy, else 0."
        yield "# TYPE meshpilot_task_up gauge"
        now = time.monotonic()
        for name in names:
            up = int(self.infos[name].healthy(now, self.healthy_after))
            yield f'meshpilot_task_up{{task="{name}"}} {up}'

    async def stop(self) -> None:
        """Cancel every task and wait for them to end."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _keep(self, info: TaskInfo, factory: TaskFactory) -> None:
        delay = self.backoff_initial
        while True:
            info.started = time.monotonic()
            try:
                await factory()
            except Exception as exc:
                ran = time.monotonic() - info.started
                delay = self.backoff_initial if ran >= self.backoff_max else delay
                self._failed(info, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff_max)
                info.state, info.retry_in = TaskState.RUNNING, None
                info.restarts += 1
                continue
            info.state = TaskState.DONE
            return

    def _failed(self, info: TaskInfo, exc: Exception, delay: float) -> None:
        info.failures += 1
        info.last_error = f"{type(exc).__name__}: {exc}"
        info.last_failure = time.time()
        info.state, info.retry_in = TaskState.RESTARTING, delay
        log.error(
            "%s: task %s failed (failure %d), restarting in %gs: %s",
            self.component, info.name, info.failures, delay, info.last_error,
        )  # fmt: skip
        log.debug("%s: traceback of task %s", self.component, info.name, exc_info=exc)


def report_task_failure(task: asyncio.Task[Any]) -> None:
    """A done callback for a short task nobody awaits: its failure is logged in one line."""
    if task.cancelled() or (exc := task.exception()) is None:
        return
    log.error("%s failed: %s: %s", task.get_name(), type(exc).__name__, exc)
    log.debug("traceback of %s", task.get_name(), exc_info=exc)


def _rfc3339(stamp: float | None) -> str | None:
    if stamp is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))
