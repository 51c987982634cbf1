"""MERGE: protobuf merge semantics (set scalars replace, repeated fields append, messages
merge field by field, map entries replace), with one difference Istio makes for filters
and transport sockets: an Any merged into an Any of the same type URL merges the typed
messages inside (a patch can change one field of a filter's config); of another type, the
patch's Any replaces it. A Duration is replaced whole, as Istio's merge does (merging
`0.5s` into `5s` field by field would give 5.5 s).
"""

from __future__ import annotations

from google.protobuf import any_pb2, message
from google.protobuf.descriptor import FieldDescriptor

from meshpilot.xds.patch.values import message_class

__all__ = ["merge_message"]

_ANY = any_pb2.Any.DESCRIPTOR.full_name
_DURATION = "google.protobuf.Duration"


def merge_message(target: message.Message, patch: message.Message) -> None:
    """Merge `patch` into `target` in place (both of one type)."""
    if target.DESCRIPTOR.full_name == _ANY:
        _merge_any(target, patch)
        return
    for fd, value in patch.ListFields():
        if fd.is_repeated:
            if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
                getattr(target, fd.name).MergeFrom(value)  # entries replace, key by key
            else:
                getattr(target, fd.name).extend(value)
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            inner = getattr(target, fd.name)
            replaced = fd.message_type.full_name == _DURATION
            if replaced or (fd.containing_oneof is not None and not target.HasField(fd.name)):
                inner.CopyFrom(value)  # another member of the oneof was set: replaced
            else:
                merge_message(inner, value)
            inner.SetInParent()  # set, even when the patch's message is empty (0s)
        else:
            setattr(target, fd.name, value)


def _merge_any(target: message.Message, patch: message.Message) -> None:
    assert isinstance(target, any_pb2.Any) and isinstance(patch, any_pb2.Any)
    if not target.type_url or target.type_url != patch.type_url:
        target.CopyFrom(patch)
        return
    name = target.TypeName()
    cls = message_class(name)
    if cls is None:
        target.CopyFrom(patch)  # a type without a message class here: replaced whole
        return
    inner, addition = cls(), cls()
    target.Unpack(inner)
    patch.Unpack(addition)
    merge_message(inner, addition)
    target.Pack(inner)
