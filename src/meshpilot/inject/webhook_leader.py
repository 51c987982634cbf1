"""On etcd, one discovery replica of a revision writes its webhook configuration (caBundle,
url): the one holding the lease `<prefix>.leases/webhook-<rev>` (store/etcd/lease.py).

The others skip the write (a debug line) and keep campaigning, so when the writer dies a
standby takes over within the lease's TTL and points the configuration at its own webhook.
Every write is fenced by the writer's term: a writer that lost its lease (paused, cut off)
has its write refused, never applied over the new writer's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable

from meshpilot.errors import MeshpilotError
from meshpilot.store.etcd.backend import EtcdStore
from meshpilot.store.etcd.errors import EtcdError
from meshpilot.store.etcd.lease import Election, leader_key

__all__ = ["WebhookWriter", "webhook_lease_name"]

log = logging.getLogger(__name__)


def webhook_lease_name(revision: str) -> str:
    return f"webhook-{revision or 'default'}"


class WebhookWriter:
    """Campaign for the revision's webhook lease; write with `publish` while leading."""

    def __init__(
        self,
        store: EtcdStore,
        revision: str,
        identity: str,
        publish: Callable[[], list[str]],
        ttl: int = 5,
        poll: float = 0.5,
    ) -> None:
        self.store = store
        self.revision = revision or "default"
        self.publish = publish
        self.poll = poll
        key = leader_key(store.prefix, webhook_lease_name(revision))
        self.election = Election(store.client, key, identity, ttl)

    async def run(self) -> None:
        """Until cancelled: stand by, write when elected, hold the lease, again if lost."""
        try:
            while True:
                await self._campaign()
                await self._lead()
        finally:
            if self.election.leadership is not None:
                with contextlib.suppress(EtcdError):
                    await asyncio.to_thread(self.election.resign)

    async def _campaign(self) -> None:
        skipped = 0  # the term of the leader we last logged skipping for
        while True:
            try:
                won = await asyncio.to_thread(self.election.try_acquire)
                held = None if won is not None else await asyncio.to_thread(self.election.leader)
            except EtcdError as exc:
                log.warning("discovery: webhook lease of revision %s: %s", self.revision, exc)
                won = held = None
            if won is not None:
                self.store.fence = (won.key, won.term)
                log.info(
                    "discovery: %s writes the webhook configuration of revision %s (term %d)",
                    won.holder, self.revision, won.term,
                )  # fmt: skip
                return
            if held is not None and held.term != skipped:
                skipped = held.term
                log.debug(
                    "discovery: webhook configuration of revision %s not written: %s writes "
                    "it (term %d)", self.revision, held.holder, held.term,
                )  # fmt: skip
            await asyncio.sleep(self.poll)

    async def _lead(self) -> None:
        try:
            names = await asyncio.to_thread(self.publish)
            log.info("discovery: wrote %s to the store", ", ".join(names))
        except MeshpilotError as exc:  # a refused (fenced) write included
            log.error("discovery: webhook configuration not written to the store: %s", exc)
        lost: list[str] = []
        done = threading.Event()  # set when cancelled: the renewing thread ends too
        try:
            await asyncio.to_thread(self.election.hold, done, lost.append)
        finally:
            done.set()
        if lost:
            log.warning(
                "discovery: no longer writes the webhook configuration of revision %s (%s)",
                self.revision, lost[0],
            )  # fmt: skip
            self.election.leadership = None
            self.election.lease = 0
