"""Revision memory shared by the apps of a pass (one git resolution per repo and branch,
even when several workers ask at once), the queue's urgent-only lane, and its hold on
resyncs while urgent work runs."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.gitops.controller import CachingRepoService, Level, WorkQueue
from meshpilot.gitops.controller.queue import RESYNC_HOLD
from tests.gitops_fixtures import make_repo


def test_concurrent_resolutions_ask_git_once(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.yaml": "x: 1\n"})
    repos = CachingRepoService(tmp_path / "cache")
    head = repo.git("rev-parse", "HEAD")
    found: list[str] = []
    threads = [
        threading.Thread(target=lambda: found.append(repos.resolve(str(repo.path), "main")))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == [head] * 4
    assert repos.git_resolves == 1


def test_expiry_by_time_keeps_newer_resolutions(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.yaml": "x: 1\n"})
    repos = CachingRepoService(tmp_path / "cache")
    url = str(repo.path)
    first = repos.resolve(url, "main")
    newer = repo.commit({"a.yaml": "x: 2\n"})
    repos.expire([url], before=time.monotonic() - 60)  # resolved after: still fresh
    assert repos.resolve(url, "main") == first and repos.git_resolves == 1
    repos.expire([url], before=time.monotonic())  # a pass that started after it
    assert repos.resolve(url, "main") == newer and repos.git_resolves == 2
    repos.expire([url])  # a webhook: everything before now
    assert repos.known(url, "main") is None


def test_urgent_lane_takes_no_resync() -> None:
    key = {n: ConfigKey(Kind.APPLICATION, "argocd", n) for n in ("resync", "drift")}

    async def scenario() -> None:
        queue = WorkQueue()
        queue.add(key["resync"], Level.LATEST, "resync", urgent=False)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(queue.get(urgent_only=True), 0.05)
        waiting = asyncio.create_task(queue.get(urgent_only=True))
        await asyncio.sleep(0)
        queue.add(key["drift"], Level.RECENT, "drift")
        assert (await asyncio.wait_for(waiting, 1)).key == key["drift"]
        assert (await queue.get()).key == key["resync"]  # a general worker still gets it

    asyncio.run(scenario())


def test_resyncs_wait_while_urgent_work_runs() -> None:
    key = {n: ConfigKey(Kind.APPLICATION, "argocd", n) for n in ("webhook", "resync", "late")}

    async def scenario() -> None:
        queue = WorkQueue()
        queue.add(key["webhook"], Level.LATEST, "webhook")
        assert (await queue.get()).key == key["webhook"]  # running now
        queue.add(key["resync"], Level.LATEST, "resync", urgent=False)
        with pytest.raises(TimeoutError):  # held: urgent work is running
            await asyncio.wait_for(queue.get(), 0.1)
        waiting = asyncio.create_task(queue.get())
        await asyncio.sleep(0.01)
        assert not waiting.done()
        queue.done(key["webhook"])  # the urgent work ends: the resync starts at once
        assert (await asyncio.wait_for(waiting, 0.05)).key == key["resync"]
        queue.done(key["resync"])
        # no resync waits longer than RESYNC_HOLD, however long the urgent work runs
        queue.add(key["webhook"], Level.LATEST, "webhook")
        assert (await queue.get()).key == key["webhook"]
        queue.add(key["late"], Level.LATEST, "resync", urgent=False)
        started = time.monotonic()
        assert (await asyncio.wait_for(queue.get(), 2)).key == key["late"]
        assert RESYNC_HOLD - 0.05 <= time.monotonic() - started < RESYNC_HOLD + 0.5

    asyncio.run(scenario())


def test_work_queued_before_the_urgent_work_began_is_held_too() -> None:
    key = {n: ConfigKey(Kind.APPLICATION, "argocd", n) for n in ("drift", "follow-up")}

    async def scenario() -> None:
        queue = WorkQueue()
        queue.add(key["follow-up"], Level.RECENT, "mesh findings", urgent=False)
        await asyncio.sleep(RESYNC_HOLD + 0.1)  # queued long ago
        queue.add(key["drift"], Level.RECENT, "drift")
        assert (await queue.get()).key == key["drift"]
        started = time.monotonic()
        waiting = asyncio.create_task(queue.get())
        await asyncio.sleep(0.1)
        assert not waiting.done()  # held while the drift runs
        assert (await asyncio.wait_for(waiting, 2)).key == key["follow-up"]
        assert RESYNC_HOLD - 0.05 <= time.monotonic() - started < RESYNC_HOLD + 0.5

    asyncio.run(scenario())


def test_a_drift_merged_into_queued_other_work_keeps_its_own_reason() -> None:
    key = ConfigKey(Kind.APPLICATION, "argocd", "shop")

    async def scenario() -> None:
        queue = WorkQueue()
        queue.add(key, Level.RECENT, "mesh findings", urgent=False)
        queue.add(key, Level.RECENT, "drift")  # made urgent by the drift: reported first
        item = await asyncio.wait_for(queue.get(urgent_only=True), 1)
        assert (item.reason, item.level) == ("drift", Level.RECENT)
        queue.done(key)
        queue.add(key, Level.LATEST, "refresh requested")
        queue.add(key, Level.RECENT, "drift")  # already urgent: the first cause stays
        item = await asyncio.wait_for(queue.get(urgent_only=True), 1)
        assert (item.reason, item.level) == ("refresh requested", Level.LATEST)

    asyncio.run(scenario())


def test_running_other_work_pauses_while_urgent_work_is_queued_or_runs() -> None:
    key = {n: ConfigKey(Kind.APPLICATION, "argocd", n) for n in ("resync", "webhook")}

    async def scenario() -> None:
        queue = WorkQueue()
        queue.add(key["resync"], Level.LATEST, "resync", urgent=False)
        resync = await queue.get()
        assert not resync.urgent
        paused: list[float] = []

        def worker() -> None:  # a resync's reconcile reaching its pause point
            started = time.monotonic()
            queue.wait_calm()
            paused.append(time.monotonic() - started)

        worker()  # nothing urgent: no wait
        assert paused[-1] < 0.05
        queue.add(key["webhook"], Level.LATEST, "webhook")  # queued: pause points hold
        thread = threading.Thread(target=worker)
        thread.start()
        webhook = await queue.get()
        assert webhook.urgent
        await asyncio.sleep(0.1)
        assert thread.is_alive()  # still held while the webhook runs
        queue.done(key["webhook"])
        await asyncio.to_thread(thread.join, 1)
        assert 0.09 <= paused[-1] < RESYNC_HOLD
        # never held longer than RESYNC_HOLD, however long the urgent work runs
        queue.add(key["webhook"], Level.LATEST, "webhook")
        assert (await queue.get()).urgent
        started = time.monotonic()
        await asyncio.to_thread(queue.wait_calm)
        assert RESYNC_HOLD - 0.05 <= time.monotonic() - started < RESYNC_HOLD + 0.5
        queue.done(key["webhook"])
        queue.done(key["resync"])

    asyncio.run(scenario())
