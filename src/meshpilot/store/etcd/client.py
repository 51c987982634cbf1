"""etcd's v3 gRPC API, through etcd's own protos as the maintained `aetcd` package ships
them compiled (its client is asyncio only; the store's writes are synchronous, so the
unary calls here use a blocking channel and the watch (watch.py) an asyncio one).

Every call goes to one endpoint of the URL; when it is unreachable the next is tried.
A write that fails in flight may have been applied: callers write with compare-and-swap
on the mod revision, so trying it again cannot apply it twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from aetcd.rpc import rpc_pb2, rpc_pb2_grpc

from meshpilot.store.etcd.errors import EtcdError
from meshpilot.store.etcd.target import EtcdTarget

__all__ = ["EtcdClient", "KeyValue", "Snapshot", "prefix_end"]

_RETRY = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
# A store of many objects is listed in one response: raise gRPC's 4 MiB default.
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 256 << 20)]
# etcd's --max-txn-ops defaults to 128 operations per transaction.
_READS_PER_TXN = 128
_TOO_MANY = "too many operations in txn request"
_TOO_LARGE = "request is too large"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: bytes
    value: bytes
    mod_revision: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    revision: int  # etcd's revision the values are of
    kvs: tuple[KeyValue, ...]


def prefix_end(prefix: bytes) -> bytes:
    """The range_end that makes a range request cover every key starting with `prefix`."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


class EtcdClient:
    def __init__(self, target: EtcdTarget, timeout: float = 5.0) -> None:
        self.target = target
        self.timeout = timeout
        self._current = 0
        self._channel: grpc.Channel | None = None
        self._lock = threading.Lock()  # handles are shared by threads (discovery, GitOps)

    def credentials(self) -> grpc.ChannelCredentials | None:
        tls = self.target.tls
        if tls is None:
            return None
        return grpc.ssl_channel_credentials(tls.ca, tls.key, tls.cert)

    def endpoint(self) -> str:
        return self.target.endpoints[self._current % len(self.target.endpoints)]

    def close(self) -> None:
        with self._lock:
            if self._channel is not None:
                self._channel.close()
                self._channel = None

    def _channel_now(self) -> grpc.Channel:
        with self._lock:
            if self._channel is None:
                creds = self.credentials()
                self._channel = (
                    grpc.secure_channel(self.endpoint(), creds, CHANNEL_OPTIONS)
                    if creds is not None
                    else grpc.insecure_channel(self.endpoint(), CHANNEL_OPTIONS)
                )
            return self._channel

    def _give_up(self, channel: grpc.Channel) -> None:
        """Use the next endpoint from now on, unless another thread moved on already.
        The old channel is not closed under calls of other threads: dropped, it closes."""
        with self._lock:
            if self._channel is channel:
                self._current += 1
                self._channel = None

    def call(self, what: str, call: Callable[[grpc.Channel], T]) -> T:
        """`call` on the current endpoint, on the next ones while they are unreachable."""
        failure: grpc.RpcError | None = None
        for _ in self.target.endpoints:
            channel = self._channel_now()
            try:
                return call(channel)
            except grpc.RpcError as exc:
                failure = exc
                if exc.code() not in _RETRY:
                    break
                self._give_up(channel)
        details = failure.details() if failure is not None else "no endpoint"
        if _TOO_MANY in (details or ""):
            details += " (one write is one transaction: raise etcd's --max-txn-ops, default 128)"
        elif _TOO_LARGE in (details or ""):
            details += " (one write is one request: raise etcd's --max-request-bytes, 1.5 MiB)"
        code = failure.code().name.lower() if failure is not None else "unavailable"
        raise EtcdError(f"etcd {self.target.display()}: {what} failed: {code}: {details}")

    def list_prefix(self, prefix: bytes) -> Snapshot:
        """Every key under `prefix`, with the revision they are all of."""
        request = rpc_pb2.RangeRequest(key=prefix, range_end=prefix_end(prefix))

        def call(channel: grpc.Channel) -> Any:
            return rpc_pb2_grpc.KVStub(channel).Range(request, timeout=self.timeout)

        response = self.call("list", call)
        kvs = tuple(KeyValue(kv.key, kv.value, kv.mod_revision) for kv in response.kvs)
        return Snapshot(response.header.revision, kvs)

    def get_many(self, keys: Sequence[bytes]) -> Snapshot:
        """The given keys (the absent ones left out), read at one revision: the first
        transaction's, which the later ones read at (etcd caps a transaction's operations)."""
        revision = 0
        kvs: list[KeyValue] = []
        for start in range(0, max(len(keys), 1), _READS_PER_TXN):
            ops = [
                rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=k, revision=revision))
                for k in keys[start : start + _READS_PER_TXN]
            ]
            response = self.txn("read", rpc_pb2.TxnRequest(success=ops))
            revision = revision or int(response.header.revision)
            kvs += (
                KeyValue(kv.key, kv.value, kv.mod_revision)
                for op in response.responses
                for kv in op.response_range.kvs
            )
        return Snapshot(revision, tuple(kvs))

    def swap(
        self,
        expected: Sequence[tuple[bytes, int]],
        puts: Sequence[tuple[bytes, bytes]] = (),
        deletes: Sequence[bytes] = (),
        fence: tuple[bytes, int] | None = None,
    ) -> tuple[bool, int]:
        """One transaction: when every key's mod revision is still the expected one (0: the
        key is absent), and the `fence` key (a leader key, lease.py) still has the given
        create revision, write `puts` and `deletes` together. (applied, revision)."""
        compare = [
            rpc_pb2.Compare(
                result=rpc_pb2.Compare.EQUAL,
                target=rpc_pb2.Compare.MOD,
                key=key,
                mod_revision=revision,
            )
            for key, revision in expected
        ]
        if fence is not None:
            compare.append(
                rpc_pb2.Compare(
                    result=rpc_pb2.Compare.EQUAL,
                    target=rpc_pb2.Compare.CREATE,
                    key=fence[0],
                    create_revision=fence[1],
                )
            )
        ops = [rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=k, value=v)) for k, v in puts]
        ops += [
            rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=k))
            for k in deletes
        ]
        response = self.txn("write", rpc_pb2.TxnRequest(compare=compare, success=ops))
        return bool(response.succeeded), int(response.header.revision)

    def compact(self, revision: int) -> None:
        """Drop the history before `revision` (what etcd's auto-compaction does)."""
        request = rpc_pb2.CompactionRequest(revision=revision, physical=True)

        def call(channel: grpc.Channel) -> Any:
            return rpc_pb2_grpc.KVStub(channel).Compact(request, timeout=self.timeout)

        self.call("compact", call)

    def txn(self, what: str, request: Any) -> Any:
        def call(channel: grpc.Channel) -> Any:
            return rpc_pb2_grpc.KVStub(channel).Txn(request, timeout=self.timeout)

        return self.call(what, call)
