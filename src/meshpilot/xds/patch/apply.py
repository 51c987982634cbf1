"""EnvoyFilter patches applied to generated listeners, route configurations and clusters,
after the generators and before the resources are serialized and sent.

Patching is cached per push like generation: a patched resource is kept under the
EnvoyFilters that apply to the proxy (namespace, name, resourceVersion, generation and patch
indexes) and the generated message it came from (pinned, so its identity stays unique), so
proxies that share generated messages and filters share the patched ones too (and their
serialized bytes, xds/resources.py), and an edited EnvoyFilter (a new resourceVersion, a new
push) is applied afresh.

A resource's patches are applied to a copy and the result checked for what Envoy would
reject (xds/patch/checks.py, order.py); only if it fails are they applied again one by one,
each checked, so that the ones at fault are reported (xds/patch/reports.py) and skipped
while the others and the rest of the configuration are served.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_pb2
from google.protobuf import message

from meshpilot.config.kinds import Kind
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.xds.patch.checks import changed_violation, first_violation, merged_violation
from meshpilot.xds.patch.clusters import cluster_context, patch_cluster
from meshpilot.xds.patch.listeners import LISTENER_LEVELS, REMOVED, patch_listener
from meshpilot.xds.patch.matching import context_matches
from meshpilot.xds.patch.order import filter_order_violation
from meshpilot.xds.patch.reports import report
from meshpilot.xds.patch.routes import ROUTE_LEVELS, patch_route_config
from meshpilot.xds.patch.selection import ConfigPatch, ProxyPatches, proxy_patches
from meshpilot.xds.protos import TypeUrl

__all__ = ["PATCHED_TYPES", "apply_patches"]

_MEMO_KEY = "xds.patch.applied"
Step = Callable[[Any, ConfigPatch, str], "bool | str"]
PATCHED_TYPES = frozenset({TypeUrl.LISTENER, TypeUrl.ROUTE, TypeUrl.CLUSTER})
_SIDECAR_CONTEXTS = ("SIDECAR_INBOUND", "SIDECAR_OUTBOUND")


def apply_patches(push: PushContext, proxy: Proxy, type_url: str, messages: list[Any]) -> list[Any]:
    """`messages` (one xDS type, as generated for `proxy`) with the proxy's EnvoyFilter
    patches applied; the very same sequence when none applies."""
    if not push.of_kind(Kind.ENVOY_FILTER) or type_url not in PATCHED_TYPES:
        return messages
    patches = proxy_patches(push, proxy)
    if patches is None:
        return messages
    gateway = proxy.type is ProxyType.ROUTER
    if type_url == TypeUrl.CLUSTER:
        relevant = patches.of("CLUSTER")
        step: Step = patch_cluster
        context_of: Callable[[Any], str] = lambda c: cluster_context(c, gateway)  # noqa: E731
    elif type_url == TypeUrl.LISTENER:
        relevant, step = patches.of(*LISTENER_LEVELS), patch_listener
        context_of = lambda lst: _listener_context(lst, gateway)  # noqa: E731
    else:
        relevant = patches.of(*ROUTE_LEVELS)
        step = lambda rc, p, ctx: patch_route_config(rc, p, ctx, gateway)  # noqa: E731
        context_of = lambda rc: "GATEWAY" if gateway else "SIDECAR_OUTBOUND"  # noqa: E731
    if not relevant:
        return messages
    memo = push.memo.setdefault(_MEMO_KEY, {})
    assert isinstance(memo, dict)
    return _patched(push, memo, type_url, messages, patches, relevant, step, context_of, gateway)


def _patched(
    push: PushContext,
    memo: dict[Any, Any],
    type_url: str,
    messages: list[Any],
    patches: ProxyPatches,
    relevant: Sequence[ConfigPatch],
    step: Step,
    context_of: Callable[[Any], str],
    gateway: bool,
) -> list[Any]:
    out = []
    get = memo.get
    prefix = (type_url, patches.key, gateway)
    for msg in messages:
        key = (prefix, id(msg))
        hit = get(key)
        if hit is None or hit[0] is not msg:
            context = context_of(msg)
            steps = [p for p in relevant if context_matches(p, context)]
            patched = _run(push, msg, steps, step, context) if steps else msg
            hit = memo[key] = (msg, patched)  # the message pinned: its id stays unique
        if hit[1] is not None:
            out.append(hit[1])
    added = _added(push, memo, patches, type_url, relevant, gateway)
    if not added:
        return out
    names = {getattr(m, "name", "") for m in out}
    for patch, value in added:
        if value.name in names:  # Envoy rejects an update naming a resource twice
            what = "listener" if type_url == TypeUrl.LISTENER else "cluster"
            report(push, patch.problem(f"the proxy already has a {what} named {value.name!r}"))
            continue
        names.add(value.name)
        out.append(value)
    return out


def _listener_context(listener: Any, gateway: bool) -> str:
    if gateway:
        return "GATEWAY"
    inbound = listener.traffic_direction == base_pb2.INBOUND
    return "SIDECAR_INBOUND" if inbound else "SIDECAR_OUTBOUND"


def _run(
    push: PushContext, msg: message.Message, patches: list[ConfigPatch], step: Step, context: str
) -> message.Message | None:
    """`msg` after `patches` (None: removed); `msg` itself when none changed it. All are
    applied to one copy and the result checked once; only when that fails are they applied
    again one by one, each checked, to skip just the ones at fault (a patch may need the
    next to be valid, as a REMOVE of the terminal filter and an ADD of another)."""
    trial = type(msg)()
    trial.CopyFrom(msg)
    changed = False
    try:
        for patch in patches:
            outcome = step(trial, patch, context)
            if outcome == REMOVED:
                return None
            changed |= outcome is True
    except Exception:
        return _run_checked(push, msg, patches, step, context)
    if not changed:
        return msg
    if _violation_after(trial, msg, patches) is None:
        return trial
    return _run_checked(push, msg, patches, step, context)


def _run_checked(
    push: PushContext, msg: message.Message, patches: list[ConfigPatch], step: Step, context: str
) -> message.Message | None:
    current = msg
    for patch in patches:
        trial = type(current)()
        trial.CopyFrom(current)
        try:
            outcome = step(trial, patch, context)
        except Exception as exc:  # a patch Envoy's types cannot take: skipped, reported
            report(push, patch.problem(f"{type(exc).__name__}: {exc}"))
            continue
        if outcome is False:
            continue
        if outcome == REMOVED:
            return None
        problem = _violation(trial, current)
        if problem is not None:
            what = f"{trial.DESCRIPTOR.name} {getattr(trial, 'name', '')!r}"
            report(push, patch.problem(f"Envoy would reject the patched {what}: {problem}"))
            continue
        current = trial
    return current


def _added(
    push: PushContext,
    memo: dict[Any, Any],
    patches: ProxyPatches,
    type_url: str,
    relevant: Sequence[ConfigPatch],
    gateway: bool,
) -> list[tuple[ConfigPatch, Any]]:
    """The listeners and clusters ADD patches add, once per proxy kind and patches."""
    if type_url == TypeUrl.ROUTE:
        return []
    apply_to = "CLUSTER" if type_url == TypeUrl.CLUSTER else "LISTENER"
    key = (type_url, patches.key, "ADD", gateway)
    found = memo.get(key)
    if found is None:
        found = memo[key] = []
        contexts = ("GATEWAY",) if gateway else _SIDECAR_CONTEXTS
        for patch in relevant:
            if patch.apply_to != apply_to or patch.operation != "ADD" or patch.value is None:
                continue
            if not any(context_matches(patch, c) for c in contexts):
                continue
            problem = _violation(patch.value, None)
            if problem is not None:
                report(push, patch.problem(f"Envoy would reject the added {apply_to}: {problem}"))
                continue
            found.append((patch, patch.value))
    return list(found)


# The patches that MERGE into the resource itself (its own applyTo, by message type): a
# check along their values is enough (the common mesh-wide CLUSTER MERGE on every cluster).
_OWN = {
    "Cluster": "CLUSTER",
    "Listener": "LISTENER",
    "RouteConfiguration": "ROUTE_CONFIGURATION",
}


def _violation_after(
    msg: message.Message, before: message.Message, patches: list[ConfigPatch]
) -> str | None:
    own = _OWN.get(msg.DESCRIPTOR.name)
    if not all(p.apply_to == own and p.operation == "MERGE" for p in patches):
        return _violation(msg, before)
    for patch in patches:
        assert patch.value is not None
        problem = merged_violation(msg, patch.value)
        if problem is not None:
            return problem
    if isinstance(msg, listener_pb2.Listener):
        return filter_order_violation(msg)
    return None


def _violation(msg: message.Message, before: message.Message | None) -> str | None:
    """What Envoy would reject in `msg`: where it differs from `before` (generated, valid),
    or anywhere when there is none; for a listener, the order of its filters too."""
    problem = first_violation(msg) if before is None else changed_violation(msg, before)
    if problem is None and isinstance(msg, listener_pb2.Listener):
        problem = filter_order_violation(msg)
    return problem
