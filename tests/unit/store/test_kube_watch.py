"""Following a kube:// store against the stand-in API server's watch protocol: events in
order on the watching loop, a dropped stream resumed from the last resourceVersion,
bookmarks advancing it, 410 Gone answered by a relist, and an invalid object written
behind the store's back reported and skipped with the last good version kept."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.store.base import ChangeEvent
from meshpilot.store.kube.backend import KubeStore
from meshpilot.store.kube.target import parse_kube_url
from tests.kube_apiserver import KubeApiServer, kube_fixture  # noqa: F401

NET = "networking.istio.io/v1"
RATINGS = ConfigKey(Kind.VIRTUAL_SERVICE, "default", "ratings")


def vs(host: Any) -> dict[str, Any]:
    return {
        "apiVersion": NET, "kind": "VirtualService",
        "metadata": {"name": "ratings", "namespace": "default"},
        "spec": {"hosts": host, "http": [{"route": [{"destination": {"host": "ratings"}}]}]},
    }  # fmt: skip


def watch_requests(kube: KubeApiServer, plural: str = "virtualservices") -> list[str]:
    return [u for m, u, _ in kube.requests if m == "GET" and f"/{plural}?watch=1" in u]


async def until(check: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def hosts(store: KubeStore) -> Any:
    obj = store.manifest(RATINGS)
    return obj["spec"]["hosts"] if obj else None


async def watching(
    kube: KubeApiServer, body: Callable[[KubeStore, list[ChangeEvent]], Any]
) -> None:
    store = KubeStore(parse_kube_url(f"kube://standin?kubeconfig={kube.kubeconfig}"))
    store.load()  # the cluster's namespaces: no change recorded below
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    task = asyncio.create_task(store.watch())
    try:
        await until(lambda: len(watch_requests(kube)) == 1, "the first watch")
        await body(store, events)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_a_dropped_watch_resumes_from_the_last_resource_version(kube: KubeApiServer) -> None:
    async def body(store: KubeStore, events: list[ChangeEvent]) -> None:
        kube.write_raw(NET, "virtualservices", vs(["a"]))
        await until(lambda: hosts(store) == ["a"], "the first event")
        last = kube.rv
        kube.drop_watches()
        kube.write_raw(NET, "virtualservices", vs(["b"]))  # while no stream is open
        await until(lambda: hosts(store) == ["b"], "the event written while dropped")
        resumed = watch_requests(kube)[-1]
        assert f"resourceVersion={last}&allowWatchBookmarks=true" in resumed
        lists = [u for m, u, _ in kube.requests if m == "GET" and u.endswith("/virtualservices")]
        assert len(lists) == 1  # resumed, never listed again
        assert [sorted(map(str, e.keys)) for e in events] == [[str(RATINGS)]] * 2

    asyncio.run(watching(kube, body))


def test_bookmarks_advance_the_resource_version(kube: KubeApiServer) -> None:
    async def body(store: KubeStore, events: list[ChangeEvent]) -> None:
        first = watch_requests(kube)[0]
        kube.bookmark()
        marked = kube.rv
        await asyncio.sleep(0.3)
        kube.drop_watches()
        await until(lambda: len(watch_requests(kube)) == 2, "the resumed watch")
        assert f"resourceVersion={marked}&" in watch_requests(kube)[1]
        assert f"resourceVersion={marked}&" not in first
        assert events == []  # a bookmark is no change

    asyncio.run(watching(kube, body))


def test_410_gone_relists_the_kind(kube: KubeApiServer) -> None:
    async def body(store: KubeStore, events: list[ChangeEvent]) -> None:
        kube.write_raw(NET, "virtualservices", vs(["a"]))
        await until(lambda: hosts(store) == ["a"], "the first event")
        kube.drop_watches()
        with kube.cond:  # written and compacted while the store was away
            kube.drop_watches()
            kube.write_raw(NET, "virtualservices", vs(["c"]))
            kube.compact()
        await until(lambda: hosts(store) == ["c"], "the relisted object")
        lists = [u for m, u, _ in kube.requests if m == "GET" and u.endswith("/virtualservices")]
        assert len(lists) == 2  # the first load, then the relist after 410

    asyncio.run(watching(kube, body))


def test_an_invalid_object_behind_our_back_keeps_the_last_good(kube: KubeApiServer) -> None:
    async def body(store: KubeStore, events: list[ChangeEvent]) -> None:
        kube.write_raw(NET, "virtualservices", vs(["good"]))
        await until(lambda: hosts(store) == ["good"], "the good version")
        kube.write_raw(NET, "virtualservices", vs("not-a-list"))
        await until(lambda: bool(store.snapshot().diagnostics), "the diagnostic")
        (diag,) = store.snapshot().diagnostics
        assert diag.file == "kube:virtualservices.networking.istio.io/default/ratings"
        assert diag.field == "spec.hosts" and "valid list" in diag.message, str(diag)
        assert store.get(RATINGS).model.spec.hosts == ["good"]  # type: ignore[union-attr]
        kube.write_raw(NET, "virtualservices", vs(["fixed"]))
        await until(lambda: hosts(store) == ["fixed"], "the fixed version")
        assert store.snapshot().diagnostics == ()

    asyncio.run(watching(kube, body))
