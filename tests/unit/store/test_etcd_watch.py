"""Following the etcd store: a watcher that loses etcd (restarted, with writes made while
the watcher was cut off) resumes from the next revision, missing nothing and repeating
nothing; one whose revision was compacted meanwhile lists the store again."""

from __future__ import annotations

import asyncio
import logging

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.runtime.ports import free_port
from meshpilot.store.base import ChangeEvent
from meshpilot.store.etcd import parse_etcd_url
from meshpilot.store.etcd.backend import EtcdStore
from tests.etcd_server import EtcdServer, etcd_fixture  # noqa: F401
from tests.unit.store.test_etcd_store import vs


def key(name: str) -> ConfigKey:
    return ConfigKey(Kind.VIRTUAL_SERVICE, "default", name)


async def wait_until(check: object, what: str, timeout: float = 10) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():  # type: ignore[operator]
        assert loop.time() < deadline, what
        await asyncio.sleep(0.02)


def test_watch_resumes_after_etcd_restarts_without_losing_or_repeating(
    etcd: EtcdServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = parse_etcd_url(etcd.url())
    writer, watcher = EtcdStore(url), EtcdStore(url)
    events: list[ChangeEvent] = []
    watcher.subscribe(events.append)
    written: dict[str, int] = {}  # name -> resourceVersion of each write

    def write(name: str, host: str) -> None:
        [result] = writer.apply(vs(name, host))
        written[f"{name}@{result.resource_version}"] = int(result.resource_version)

    async def scenario() -> None:
        task = asyncio.create_task(watcher.watch())
        try:
            await wait_until(lambda: watcher.loaded, "the watcher listed the store")
            await asyncio.to_thread(write, "a", "one")
            await wait_until(lambda: watcher.get(key("a")) is not None, "a reached the watcher")
            await asyncio.to_thread(etcd.stop)
            await asyncio.sleep(0.5)  # the watcher notices and retries meanwhile
            await asyncio.to_thread(etcd.start)
            for host in ("two", "three", "four"):  # written before it is back, most likely
                await asyncio.to_thread(write, "a", host)
            await asyncio.to_thread(write, "b", "one")
            await asyncio.to_thread(writer.delete, [key("b")])
            await wait_until(
                lambda: watcher.revision == writer.client.list_prefix(b"/meshpilot/").revision,
                "the watcher caught up",
            )
        finally:
            task.cancel()

    with caplog.at_level(logging.WARNING, "meshpilot.store.etcd"):
        asyncio.run(scenario())
    assert "lost" in caplog.text and "reconnecting" in caplog.text  # it did lose etcd
    # every write seen once, in order, at its own revision: a's four edits, b's create,
    # then b's delete (the last revision)
    deleted_at = writer.client.list_prefix(b"/meshpilot/").revision
    assert [e.store_version for e in events] == [*sorted(written.values()), deleted_at]
    spec = watcher.get(key("a"))
    assert spec is not None and spec.model.spec.hosts == ["four"]
    assert watcher.get(key("b")) is None


def test_a_compacted_revision_makes_the_watcher_list_again(
    etcd: EtcdServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = parse_etcd_url(etcd.url())
    writer, watcher = EtcdStore(url), EtcdStore(url)
    writer.apply(vs("a", "one") + vs("b", "one"))
    watcher.load()
    events: list[ChangeEvent] = []
    watcher.subscribe(events.append)
    # while the watcher is not watching: a changes, b goes, c comes, history compacted
    writer.apply(vs("a", "two"))
    writer.delete([key("b")])
    writer.apply(vs("c", "one"))
    writer.client.compact(writer.client.list_prefix(b"/meshpilot/").revision)

    async def scenario() -> None:
        task = asyncio.create_task(watcher.watch())
        try:
            await wait_until(lambda: watcher.get(key("c")) is not None, "the watcher relisted")
        finally:
            task.cancel()

    with caplog.at_level(logging.WARNING, "meshpilot.store.etcd"):
        asyncio.run(scenario())
    assert "was compacted; listing the store again" in caplog.text
    [event] = events
    assert event.keys == {key("a"), key("b"), key("c")}
    assert sorted(k.name for k in watcher.snapshot().objects) == ["a", "c"]
    a = watcher.get(key("a"))
    assert a is not None and a.model.spec.hosts == ["two"]


def test_a_watch_skips_a_dead_endpoint(etcd: EtcdServer) -> None:
    url = parse_etcd_url(f"etcd://127.0.0.1:{free_port()},{etcd.endpoint}/meshpilot")
    watcher = EtcdStore(url)

    async def scenario() -> None:
        task = asyncio.create_task(watcher.watch())
        try:
            await wait_until(lambda: watcher.loaded, "the watcher listed the store")
            await asyncio.to_thread(EtcdStore(url).apply, vs("a", "one"))
            await wait_until(lambda: watcher.get(key("a")) is not None, "a reached the watcher")
        finally:
            task.cancel()

    asyncio.run(scenario())
