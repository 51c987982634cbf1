"""Many serialized messages of one type parsed in one C call.

Generators assemble resources as bytes (templates plus per-resource fields) and must hand
out messages. Parsing each with `FromString` pays a call, an arena and a wrapper per
resource; here the bodies become the entries of one `repeated` field of a batch message
(`message Batch { repeated T items = 1; }`, a type added at run time to the default
descriptor pool, in package `meshpilot.internal.batch`) and are parsed together. The
entries are ordinary messages of type T: each keeps the batch's arena alive, and each
parses exactly as `FromString` of its body would (concatenated fields merge as in wire.py).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cache
from typing import Protocol, TypeVar

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

from meshpilot.xds.wire import tag, varint

__all__ = ["parse_many"]

M = TypeVar("M", bound=message.Message)

_ITEMS = 1  # Batch.items
_ITEMS_TAG = tag(_ITEMS)
_PACKAGE = "meshpilot.internal.batch"


class _Batch(Protocol):
    items: Sequence[message.Message]

    def MergeFromString(self, serialized: bytes) -> int: ...


def parse_many(cls: type[M], bodies: Sequence[bytes]) -> list[M]:
    """`[cls.FromString(b) for b in bodies]`, in one parse."""
    if len(bodies) < 2:
        return [cls.FromString(b) for b in bodies]
    batch: _Batch = _batch_class(cls.DESCRIPTOR.full_name, cls.DESCRIPTOR.file.name)()
    # Headers and bodies joined once: framing each body first would copy it twice.
    parts: list[bytes] = []
    for body in bodies:
        n = len(body)
        parts.append(
            _ITEMS_TAG + (bytes((n & 0x7F | 0x80, n >> 7)) if 0x80 <= n < 0x4000 else varint(n))
        )
        parts.append(body)
    batch.MergeFromString(b"".join(parts))
    items: list[M] = list(batch.items)
    return items


@cache
def _batch_class(full_name: str, file_name: str) -> type[_Batch]:
    """The batch message type of `full_name` (declared in `file_name`), made once per
    process (under a lock: generators may run in several threads)."""
    with _LOCK:
        return _make_batch_class(full_name, file_name)


_LOCK = threading.Lock()


def _make_batch_class(full_name: str, file_name: str) -> type[_Batch]:
    pool = descriptor_pool.Default()
    batch_name = full_name.replace(".", "_")
    try:  # already added (by a thread that lost the race to the cache)
        found: type[_Batch] = message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"{_PACKAGE}.{batch_name}")
        )
        return found
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto(
        name=f"meshpilot/internal/batch/{batch_name}.proto",
        package=_PACKAGE,
        syntax="proto3",
        dependency=[file_name],
    )
    proto.message_type.add(name=batch_name).field.add(
        name="items",
        number=_ITEMS,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
        type_name=f".{full_name}",
    )
    pool.Add(proto)
    descriptor = pool.FindMessageTypeByName(f"{_PACKAGE}.{batch_name}")
    batch: type[_Batch] = message_factory.GetMessageClass(descriptor)
    return batch
