"""Following an etcd store: etcd's watch of the prefix from the revision after the last one
taken in, so a dropped connection (etcd restarted, an endpoint gone) resumes where it
stopped, without missing or repeating an event; a revision compacted meanwhile makes the
store list the prefix again. etcd never splits one revision's events between responses:
each response is taken in whole, as one ChangeEvent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc
from aetcd.rpc import kv_pb2, rpc_pb2, rpc_pb2_grpc

from meshpilot.store.etcd.client import CHANNEL_OPTIONS, KeyValue, prefix_end
from meshpilot.store.etcd.codec import key_of

if TYPE_CHECKING:
    from meshpilot.store.etcd.backend import EtcdStore

__all__ = ["follow"]

log = logging.getLogger(__name__)
_RETRY_MIN, _RETRY_MAX = 0.1, 2.0  # seconds between reconnection attempts (doubling)
# A peer gone without a reset (a partition) is noticed by pings; etcd refuses pings more
# often than every 5 s (--grpc-keepalive-min-time).
_KEEPALIVE = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
]
# etcd cancels the watch when its member loses the cluster's leader (it would go stale).
_REQUIRE_LEADER = (("hasleader", "true"),)


async def follow(store: EtcdStore) -> None:
    """Take in every change of the store's prefix until cancelled."""
    if not store.loaded:
        await asyncio.to_thread(store.load)
    delay = _RETRY_MIN
    attempt = 0
    while True:
        endpoints = store.target.endpoints
        endpoint = endpoints[attempt % len(endpoints)]
        try:
            compacted = await _watch_once(store, endpoint)
            delay = _RETRY_MIN
            if compacted:
                log.warning(
                    "%s: revision %d was compacted; listing the store again", store, store.revision
                )
                await asyncio.to_thread(store.load)
        except (grpc.aio.AioRpcError, OSError) as exc:
            message = exc.details() if isinstance(exc, grpc.aio.AioRpcError) else str(exc)
            log.warning(
                "%s: watch from revision %d lost at %s (%s); reconnecting in %.1fs",
                store, store.revision + 1, endpoint, message, delay,
            )  # fmt: skip
            attempt += 1  # the next endpoint
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)


async def _watch_once(store: EtcdStore, endpoint: str) -> bool:
    """One watch stream from the next revision; True when that revision was compacted."""
    creds, options = store.client.credentials(), CHANNEL_OPTIONS + _KEEPALIVE
    channel = (
        grpc.aio.secure_channel(endpoint, creds, options)
        if creds is not None
        else grpc.aio.insecure_channel(endpoint, options)
    )
    prefix = store.prefix.encode()
    create = rpc_pb2.WatchCreateRequest(
        key=prefix, range_end=prefix_end(prefix), start_revision=store.revision + 1
    )
    done = asyncio.Event()

    async def requests() -> AsyncIterator[Any]:
        yield rpc_pb2.WatchRequest(create_request=create)
        await done.wait()  # the stream lasts as long as the request side stays open

    try:
        call = rpc_pb2_grpc.WatchStub(channel).Watch(requests(), metadata=_REQUIRE_LEADER)
        async for response in call:
            if response.compact_revision:
                return True
            if response.canceled:
                raise OSError(f"etcd cancelled the watch: {response.cancel_reason}")
            _take_in(store, response.events)
        raise OSError("etcd ended the watch")
    finally:
        done.set()
        await channel.close()


def _take_in(store: EtcdStore, events: Any) -> None:
    """The events of revisions after the store's, as one change (none: ignored)."""
    with store.lock:
        puts: dict[bytes, KeyValue] = {}
        deleted: dict[bytes, None] = {}
        revision = store.revision
        for event in events:
            kv = event.kv
            if kv.mod_revision <= store.revision:
                continue  # taken in already (by a listing or this handle's own write)
            revision = max(revision, kv.mod_revision)
            if event.type == kv_pb2.Event.DELETE:
                puts.pop(kv.key, None)
                deleted[kv.key] = None
            else:
                deleted.pop(kv.key, None)
                puts[kv.key] = KeyValue(kv.key, kv.value, kv.mod_revision)
        if revision > store.revision:
            gone = [k for raw in deleted if (k := key_of(store.prefix, raw)) is not None]
            store.take_in(list(puts.values()), gone, revision)
