"""Leader election on etcd leases, with fencing: for what must run once (the GitOps
controller) among replicas on one etcd.

A candidate grants itself a lease (TTL seconds) and creates the leader key under it, in a
transaction that requires the key to be absent; the value names the holder. The holder
renews the lease every TTL/3; a holder that crashed or was cut off stops renewing, etcd
deletes the key when the lease expires, and the next candidate creates it.

Fencing: the leader key's create revision is the term. Every write of the leader carries
a compare of that key's create revision with its own term (EtcdStore.fence), so once the
key expired or belongs to another, its writes fail as a whole: a leader that lost its lease
cannot write after another started, whatever its clock or a pause. It also steps down by
itself when it could not renew within 2/3 of the TTL (before etcd can expire it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from aetcd.rpc import rpc_pb2, rpc_pb2_grpc

from meshpilot.store.etcd.client import EtcdClient
from meshpilot.store.etcd.errors import EtcdError, NotLeaderError

__all__ = ["Election", "Leadership", "NotLeaderError", "leader_key"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Leadership:
    key: bytes
    holder: str  # who leads (the holder's identity)
    term: int  # the leader key's create revision: the fence of the holder's writes


def leader_key(prefix: str, name: str) -> bytes:
    """`/meshpilot.leases/<name>` for the prefix `/meshpilot/`: beside the objects, outside
    the prefix's range (which the stores list and watch)."""
    return f"{prefix.rstrip('/')}.leases/{name}".encode()


class Election:
    def __init__(self, client: EtcdClient, key: bytes, identity: str, ttl: int = 5) -> None:
        self.client = client
        self.key = key
        self.identity = identity
        self.ttl = ttl
        self.lease = 0
        self.leadership: Leadership | None = None

    def leader(self) -> Leadership | None:
        """Who holds the key now (None: nobody)."""
        request = rpc_pb2.RangeRequest(key=self.key)

        def call(channel: grpc.Channel) -> Any:
            return rpc_pb2_grpc.KVStub(channel).Range(request, timeout=self.client.timeout)

        response = self.client.call("read the leader key", call)
        if not response.kvs:
            return None
        kv = response.kvs[0]
        return Leadership(self.key, kv.value.decode(errors="replace"), int(kv.create_revision))

    def try_acquire(self) -> Leadership | None:
        """Create the leader key under our lease when it is absent; our Leadership, or
        None while another holds it."""
        if self.lease == 0:
            self.lease = self._grant()
        absent = rpc_pb2.Compare(
            result=rpc_pb2.Compare.EQUAL, target=rpc_pb2.Compare.CREATE, key=self.key,
            create_revision=0,
        )  # fmt: skip
        put = rpc_pb2.PutRequest(key=self.key, value=self.identity.encode(), lease=self.lease)
        request = rpc_pb2.TxnRequest(compare=[absent], success=[rpc_pb2.RequestOp(request_put=put)])
        response = self.client.txn("campaign", request)
        if response.succeeded:
            self.leadership = Leadership(self.key, self.identity, int(response.header.revision))
            return self.leadership
        if not self.keep_alive():  # our lease expired while we waited: a new one next time
            self.lease = 0
        return None

    def campaign(self, stop: threading.Event, poll: float = 0.5) -> Leadership | None:
        """Wait until this candidate leads (None when `stop` is set first); etcd being
        unreachable meanwhile is logged and waited out."""
        while not stop.is_set():
            try:
                won = self.try_acquire()
            except EtcdError as exc:
                log.warning("leader election: %s", exc)
                won = None
            if won is not None:
                log.info("leader election: %s leads (%s, term %d)", won.holder, won.key, won.term)
                return won
            stop.wait(poll)
        return None

    def keep_alive(self) -> bool:
        """Renew the lease once; False when it has expired (or was revoked)."""
        request = rpc_pb2.LeaseKeepAliveRequest(ID=self.lease)
        # an etcd that hangs (rather than refusing) must not hold up the step-down
        timeout = min(self.client.timeout, self.ttl / 3)

        def call(channel: grpc.Channel) -> Any:
            stream = rpc_pb2_grpc.LeaseStub(channel).LeaseKeepAlive(
                iter([request]), timeout=timeout
            )
            return next(stream)

        response = self.client.call("renew the lease", call)
        return int(response.TTL) > 0

    def hold(self, stop: threading.Event, lost: Callable[[str], None]) -> None:
        """Renew the lease every TTL/3 until `stop`; call `lost(reason)` and return when
        it could not be renewed within 2/3 of the TTL, or the key is no longer ours."""
        renewed = time.monotonic()
        while not stop.wait(self.ttl / 3):
            try:
                alive = self.keep_alive()
            except EtcdError as exc:
                if time.monotonic() - renewed > self.ttl * 2 / 3:
                    lost(f"the lease was not renewed for {self.ttl * 2 / 3:g} s: {exc}")
                    return
                continue
            if not alive:
                lost("the lease expired")
                return
            renewed = time.monotonic()

    def resign(self) -> None:
        """Give up: revoking the lease deletes the leader key, so another takes over now
        rather than after the TTL."""
        if self.lease == 0:
            return
        request = rpc_pb2.LeaseRevokeRequest(ID=self.lease)

        def call(channel: grpc.Channel) -> Any:
            return rpc_pb2_grpc.LeaseStub(channel).LeaseRevoke(request, timeout=self.client.timeout)

        try:
            self.client.call("revoke the lease", call)
        except EtcdError as exc:
            log.warning("leader election: %s (the lease expires by itself)", exc)
        self.lease = 0
        self.leadership = None

    def _grant(self) -> int:
        request = rpc_pb2.LeaseGrantRequest(TTL=self.ttl)

        def call(channel: grpc.Channel) -> Any:
            return rpc_pb2_grpc.LeaseStub(channel).LeaseGrant(request, timeout=self.client.timeout)

        return int(self.client.call("grant a lease", call).ID)
