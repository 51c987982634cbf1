"""The proto constraints Envoy checks when it loads a resource (protoc-gen-validate rules
in the Envoy protos), for patched resources: a patch that breaks one is skipped instead of
making Envoy reject the whole update.

The common rules are checked: required messages and oneofs, string length, number and
duration bounds, repeated and map sizes, defined enum values; typed configs (Any) are
checked inside when their message type is known.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf import any_pb2, message
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from validate import validate_pb2

from meshpilot.xds.patch.values import message_class

__all__ = ["changed_violation", "first_violation", "merged_violation"]

_NUMBERS = (
    "int32",
    "int64",
    "uint32",
    "uint64",
    "sint32",
    "sint64",
    "double",
    "float",
    "fixed32",
    "fixed64",
    "sfixed32",
    "sfixed64",
)
_rules_memo: dict[str, list[tuple[FieldDescriptor, Any]]] = {}


def first_violation(msg: message.Message, path: str = "") -> str | None:
    """The first rule `msg` breaks, as `field.path: what`; None when it keeps them all."""
    return _walk(msg, None, path)


def changed_violation(new: message.Message, old: message.Message) -> str | None:
    """The first rule `new` breaks where it differs from `old` (a generated resource, taken
    as valid): parts equal to their counterpart in `old` are not walked again, so checking
    a patched 4000-cluster CDS or a large route config costs what the patches changed."""
    return _walk(new, old, "")


def merged_violation(result: message.Message, patch: message.Message, path: str = "") -> str | None:
    """The first rule `result` breaks in the fields a MERGE of `patch` into it set: the
    rest of it is as generated (valid). What they hold is checked whole (an appended item,
    a typed config), the messages they merged into along the patch."""
    desc = result.DESCRIPTOR
    if desc.full_name == any_pb2.Any.DESCRIPTOR.full_name:
        return _walk(result, None, path)
    for oneof in _required_oneofs(desc):
        if not result.WhichOneof(oneof):
            return f"{path or desc.name}: one of {oneof} is required"
    rules = _rules_by_name(desc)
    for fd, value in patch.ListFields():
        where = f"{path}.{fd.name}" if path else fd.name
        if fd.name in rules:
            problem = _check_field(result, fd, rules[fd.name], where)
            if problem:
                return problem
        if fd.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        merged = getattr(result, fd.name)
        if fd.message_type.GetOptions().map_entry:
            items = [merged[k] for k in value] if _map_of_messages(fd) else []
        elif fd.is_repeated:
            items = list(merged)[len(merged) - len(value) :]  # the appended ones
        else:
            problem = merged_violation(merged, value, where)
            if problem:
                return problem
            continue
        for item in items:
            problem = _walk(item, None, where)
            if problem:
                return problem
    return None


def _rules_by_name(desc: Descriptor) -> dict[str, Any]:
    found = _by_name_memo.get(desc.full_name)
    if found is None:
        found = _by_name_memo[desc.full_name] = {fd.name: r for fd, r in _rules(desc)}
    return found


_by_name_memo: dict[str, dict[str, Any]] = {}


def _walk(msg: Any, old: Any, path: str) -> str | None:
    if old is not None and msg == old:
        return None
    desc = msg.DESCRIPTOR
    if desc.full_name == any_pb2.Any.DESCRIPTOR.full_name:
        return _check_any(msg, old, path)
    for oneof in _required_oneofs(desc):
        if not msg.WhichOneof(oneof):
            return f"{path or desc.name}: one of {oneof} is required"
    for fd, rules in _rules(desc):
        if old is not None and _same(msg, old, fd):
            continue
        problem = _check_field(msg, fd, rules, f"{path}.{fd.name}" if path else fd.name)
        if problem:
            return problem
    for fd, value in msg.ListFields():
        if fd.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        if old is not None and _same(msg, old, fd):
            continue
        where = f"{path}.{fd.name}" if path else fd.name
        before = getattr(old, fd.name) if old is not None else None
        if fd.message_type.GetOptions().map_entry:
            if not _map_of_messages(fd):
                continue
            pairs = [(v, before.get(k) if before is not None else None) for k, v in value.items()]
        elif fd.is_repeated:
            pairs = _aligned(list(value), list(before) if before is not None else [])
        else:
            had = old is not None and old.HasField(fd.name)
            pairs = [(value, before if had else None)]
        for item, counterpart in pairs:
            problem = _walk(item, counterpart, where)
            if problem:
                return problem
    return None


def _same(msg: Any, old: Any, fd: FieldDescriptor) -> bool:
    """The field is the same in both (compared in C, containers and messages whole)."""
    if fd.has_presence and msg.HasField(fd.name) != old.HasField(fd.name):
        return False
    return bool(getattr(msg, fd.name) == getattr(old, fd.name))


def _aligned(new: list[Any], old: list[Any]) -> list[tuple[Any, Any]]:
    """Items of `new` with their counterpart in `old`: the same position when the lengths
    match, else the common head and tail (an insert or removal in between), the rest new."""
    if len(new) == len(old):
        return list(zip(new, old, strict=True))
    head = 0
    while head < min(len(new), len(old)) and new[head] == old[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(new), len(old)) - head
        and new[len(new) - 1 - tail] == old[len(old) - 1 - tail]
    ):
        tail += 1
    middle = new[head : len(new) - tail]
    return [(item, None) for item in middle]  # head and tail are unchanged: nothing to check


_oneofs_memo: dict[str, list[str]] = {}


def _required_oneofs(desc: Descriptor) -> list[str]:
    found = _oneofs_memo.get(desc.full_name)
    if found is None:
        found = _oneofs_memo[desc.full_name] = [
            o.name for o in desc.oneofs if o.GetOptions().Extensions[validate_pb2.required]
        ]
    return found


def _map_of_messages(fd: FieldDescriptor) -> bool:
    return bool(fd.message_type.fields_by_name["value"].type == FieldDescriptor.TYPE_MESSAGE)


def _check_any(msg: Any, old: Any, path: str) -> str | None:
    cls = message_class(msg.TypeName())
    if cls is None:
        return None
    inner = cls()
    try:
        msg.Unpack(inner)
    except message.DecodeError as exc:
        return f"{path}: {exc}"
    before = None
    if old is not None and old.type_url == msg.type_url:
        before = cls()
        old.Unpack(before)
    return _walk(inner, before, path)


def _rules(desc: Descriptor) -> list[tuple[FieldDescriptor, Any]]:
    found = _rules_memo.get(desc.full_name)
    if found is None:
        found = []
        for fd in desc.fields:
            options = fd.GetOptions()
            if options.HasExtension(validate_pb2.rules):
                found.append((fd, options.Extensions[validate_pb2.rules]))
        _rules_memo[desc.full_name] = found
    return found


def _check_field(msg: Any, fd: FieldDescriptor, rules: Any, path: str) -> str | None:
    oneof = fd.containing_oneof
    if oneof is not None and msg.WhichOneof(oneof.name) != fd.name:
        return None  # the rules of a oneof member apply when it is the one set
    kind = rules.WhichOneof("type")
    repeated = fd.is_repeated
    if kind in ("repeated", "map"):
        bounds = getattr(rules, kind)
        low, high = ("min_items", "max_items") if kind == "repeated" else ("min_pairs", "max_pairs")
        size = len(getattr(msg, fd.name))
        if getattr(bounds, low) and size < getattr(bounds, low):
            return f"{path}: at least {getattr(bounds, low)} item(s) required"
        if bounds.HasField(high) and size > getattr(bounds, high):
            return f"{path}: at most {getattr(bounds, high)} item(s) allowed"
        return None
    if repeated:
        return None
    if rules.HasField("message") and rules.message.required and not msg.HasField(fd.name):
        return f"{path}: value is required"
    if kind is None:
        return None
    has = msg.HasField(fd.name) if fd.has_presence else True
    value = getattr(msg, fd.name)
    if kind == "duration":
        if not has:
            return f"{path}: value is required" if rules.duration.required else None
        return _bounds(path, value.ToNanoseconds(), rules.duration, lambda d: d.ToNanoseconds())
    if kind == "string":
        s = rules.string
        if s.ignore_empty and not value:
            return None
        if s.min_len and len(value) < s.min_len:
            return f"{path}: at least {s.min_len} character(s) required"
        if s.HasField("max_len") and len(value) > s.max_len:
            return f"{path}: at most {s.max_len} character(s) allowed"
        if s.min_bytes and len(value.encode()) < s.min_bytes:
            return f"{path}: at least {s.min_bytes} byte(s) required"
        return None
    if kind == "enum":
        if rules.enum.defined_only and fd.enum_type.values_by_number.get(value) is None:
            return f"{path}: {value} is not a defined value"
        return None
    if kind in _NUMBERS:
        if fd.type == FieldDescriptor.TYPE_MESSAGE:  # a wrapper (UInt32Value, ...)
            if not has:
                return None
            value = value.value
        return _bounds(path, value, getattr(rules, kind), lambda n: n)
    return None


def _bounds(path: str, value: Any, rules: Any, convert: Callable[[Any], Any]) -> str | None:
    if getattr(rules, "ignore_empty", False) and not value:
        return None
    for name, words in _BOUNDS:
        if rules.HasField(name):
            bound = convert(getattr(rules, name))
            if not _within(name, value, bound):
                return f"{path}: must be {words} {_show(getattr(rules, name))}"
    return None


_BOUNDS = (("gt", "greater than"), ("gte", "at least"), ("lt", "less than"), ("lte", "at most"))


def _within(name: str, value: Any, bound: Any) -> bool:
    if name == "gt":
        return bool(value > bound)
    if name == "gte":
        return bool(value >= bound)
    if name == "lt":
        return bool(value < bound)
    return bool(value <= bound)


def _show(bound: Any) -> str:
    if hasattr(bound, "ToJsonString"):
        return str(bound.ToJsonString())
    return str(bound)
