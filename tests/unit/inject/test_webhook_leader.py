"""On a real etcd, discovery replicas of one revision elect the writer of its webhook
configuration: one writes its url, the other skips; when the writer stops the standby takes
over and points the configuration at itself; a deposed writer's write is refused."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.inject.webhook_leader import WebhookWriter
from meshpilot.inject.webhook_store import publish_webhook
from meshpilot.store.etcd import parse_etcd_url
from meshpilot.store.etcd.backend import EtcdStore
from meshpilot.store.etcd.errors import NotLeaderError
from tests.etcd_server import EtcdServer, etcd_fixture  # noqa: F401

MWC = ConfigKey(Kind.MUTATING_WEBHOOK_CONFIGURATION, "", "istio-sidecar-injector-x")
ROOT = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _writer(etcd: EtcdServer, port: int) -> WebhookWriter:
    store = EtcdStore(parse_etcd_url(etcd.url()))
    store.load()
    url = f"https://127.0.0.1:{port}/inject"
    publish = functools.partial(publish_webhook, store, ROOT, "x", url)
    return WebhookWriter(store, "x", f"replica-{port}", publish, ttl=1, poll=0.05)


def _url(etcd: EtcdServer) -> str | None:
    store = EtcdStore(parse_etcd_url(etcd.url()))
    store.load()
    manifest = store.manifest(MWC)
    return None if manifest is None else str(manifest["webhooks"][0]["clientConfig"]["url"])


async def _until(check: object, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():  # type: ignore[operator]
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {timeout} s")


def test_one_replica_writes_and_a_standby_takes_over(
    etcd: EtcdServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="meshpilot.inject.webhook_leader")

    async def scenario() -> None:
        first, second = _writer(etcd, 1001), _writer(etcd, 1002)
        a = asyncio.create_task(first.run())
        await _until(lambda: _url(etcd) is not None, 10)
        b = asyncio.create_task(second.run())
        await asyncio.sleep(1.5)  # longer than the TTL: the standby still does not write
        assert _url(etcd) == "https://127.0.0.1:1001/inject"
        assert (
            "webhook configuration of revision x not written: replica-1001 writes it" in caplog.text
        )
        a.cancel()  # the writer stops (resigning): the standby writes its own url
        with contextlib.suppress(asyncio.CancelledError):
            await a
        took = await _until(lambda: _url(etcd) == "https://127.0.0.1:1002/inject", 10)
        assert took < 1 + 1.5
        b.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await b

    asyncio.run(scenario())


def test_a_deposed_writers_write_is_refused(etcd: EtcdServer) -> None:
    async def scenario() -> None:
        old, new = _writer(etcd, 1001), _writer(etcd, 1002)
        leading = asyncio.create_task(old._campaign())
        await leading
        # the old writer stops renewing (paused, cut off): its lease expires, the new one
        # is elected and writes
        term = old.election.leadership
        assert term is not None
        standing = asyncio.create_task(new.run())
        await _until(lambda: _url(etcd) == "https://127.0.0.1:1002/inject", 10)
        with pytest.raises(NotLeaderError, match=r"no longer leads .*webhook-x was lost"):
            old.publish()  # its write, delayed until after the new writer's
        assert _url(etcd) == "https://127.0.0.1:1002/inject"
        standing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await standing

    asyncio.run(scenario())
