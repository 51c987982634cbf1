"""Which EnvoyFilter patches apply to a proxy, in the order Istio applies them.

Filters of the root namespace apply to every proxy their selector selects, those of the
proxy's own namespace next; all are then ordered by `priority` (stable, so root namespace
first on a tie), within a namespace by creation time, then name (Istio's
sortConfigByCreationTime). Patches of a filter keep their order in `configPatches`. A
patch whose `match.proxy` does not fit the proxy is dropped here, once per proxy kind.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from google.protobuf import message

from meshpilot.config.istio.envoy_filter import EnvoyConfigObjectPatch, EnvoyFilter, ProxyMatch
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.xds.patch.reports import PatchProblem, report
from meshpilot.xds.patch.values import PatchValueError, parse_value

__all__ = ["ConfigPatch", "ProxyPatches", "proxy_metadata", "proxy_patches"]

_MEMO_KEY = "xds.patch.selected"
_PARSED_KEY = "xds.patch.parsed"
_GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"


@dataclass(frozen=True, slots=True)
class ConfigPatch:
    namespace: str  # of the EnvoyFilter
    name: str
    index: int  # in configPatches
    apply_to: str
    operation: str
    context: str
    listener: Mapping[str, Any] | None
    route_configuration: Mapping[str, Any] | None
    cluster: Mapping[str, Any] | None
    value: message.Message | None
    location: str

    def problem(self, text: str) -> PatchProblem:
        return PatchProblem(self.namespace, self.name, self.index, text, self.location)


@dataclass(frozen=True, slots=True)
class ProxyPatches:
    # The filters (namespace, name, resourceVersion, generation) and patch indexes that
    # apply: part of the cache key of every resource they patch.
    key: tuple[tuple[str, str, str, int, int], ...]
    by_apply_to: Mapping[str, tuple[ConfigPatch, ...]]

    def of(self, *apply_to: str) -> tuple[ConfigPatch, ...]:
        if len(apply_to) == 1:
            return self.by_apply_to.get(apply_to[0], ())
        return tuple(p for a in apply_to for p in self.by_apply_to.get(a, ()))


def proxy_metadata(proxy: Proxy) -> dict[str, str]:
    """The node metadata `match.proxy.metadata` is compared with (string values only)."""
    return {
        "ISTIO_VERSION": proxy.istio_version,
        "NAMESPACE": proxy.namespace,
        "NAME": proxy.pod_name,
        "WORKLOAD_NAME": proxy.workload_name,
        "SERVICE_ACCOUNT": proxy.service_account,
        "INTERCEPTION_MODE": "REDIRECT" if proxy.intercept else "NONE",
        "CLUSTER_ID": "Kubernetes",
        **{f"LABELS.{k}": v for k, v in proxy.labels.items()},
    }


def proxy_patches(push: PushContext, proxy: Proxy) -> ProxyPatches | None:
    """The patches for `proxy`, or None when no EnvoyFilter applies (memoised per push)."""
    filters = cast(Sequence[ConfigObject[EnvoyFilter]], push.of_kind(Kind.ENVOY_FILTER))
    if not filters:
        return None
    memo = push.memo.setdefault(_MEMO_KEY, {})
    assert isinstance(memo, dict)
    memo_key = (
        proxy.type,
        proxy.namespace,
        frozenset(proxy.labels.items()),
        proxy.istio_version,
        proxy.pod_name,
        proxy.workload_name,
        proxy.service_account,
        proxy.intercept,
    )
    if memo_key in memo:
        found: ProxyPatches | None = memo[memo_key]
        return found
    memo[memo_key] = found = _select(push, filters, proxy)
    return found


def _select(
    push: PushContext, filters: Sequence[ConfigObject[EnvoyFilter]], proxy: Proxy
) -> ProxyPatches | None:
    root = push.mesh.root_namespace
    chosen = [f for f in filters if f.namespace == root and _selects(f, proxy)]
    if proxy.namespace != root:
        chosen += [f for f in filters if f.namespace == proxy.namespace and _selects(f, proxy)]
    # Root namespace first, then creation order; priority sorts stably over both.
    chosen.sort(key=lambda f: (f.namespace != root, _created(f), f.name))
    chosen.sort(key=lambda f: f.model.spec.priority)
    metadata = proxy_metadata(proxy)
    by_apply_to: dict[str, list[ConfigPatch]] = {}
    key = []
    for obj in chosen:
        meta = obj.model.metadata
        for patch in _parsed(push, obj):
            if not _proxy_matches(patch, obj, proxy, metadata):
                continue
            by_apply_to.setdefault(patch.apply_to, []).append(patch)
            key.append(
                (obj.namespace, obj.name, meta.resource_version, meta.generation, patch.index)
            )
    if not key:
        return None
    return ProxyPatches(tuple(key), {k: tuple(v) for k, v in by_apply_to.items()})


def _created(obj: ConfigObject[EnvoyFilter]) -> str:
    return obj.model.metadata.creation_timestamp or ""


def _selects(obj: ConfigObject[EnvoyFilter], proxy: Proxy) -> bool:
    spec = obj.model.spec
    if spec.target_refs:
        # Gateways (and waypoints) by the gateway-name label of their pods.
        return any(
            ref.kind == "Gateway"
            and (ref.namespace or obj.namespace) == proxy.namespace
            and proxy.labels.get(_GATEWAY_NAME_LABEL) == ref.name
            for ref in spec.target_refs
        )
    if spec.workload_selector is None:
        return True
    labels = spec.workload_selector.labels
    return all(proxy.labels.get(k) == v for k, v in labels.items())


def _proxy_matches(
    patch: ConfigPatch, obj: ConfigObject[EnvoyFilter], proxy: Proxy, metadata: Mapping[str, str]
) -> bool:
    cp = obj.model.spec.config_patches[patch.index]
    match: ProxyMatch | None = cp.match.proxy if cp is not None and cp.match else None
    if patch.context == "GATEWAY" and proxy.type is not ProxyType.ROUTER:
        return False
    if patch.context.startswith("SIDECAR_") and proxy.type is not ProxyType.SIDECAR:
        return False
    if match is None:
        return True
    if match.proxy_version and not re.search(match.proxy_version, proxy.istio_version):
        return False
    return all(metadata.get(k) == v for k, v in match.metadata.items())


def _parsed(push: PushContext, obj: ConfigObject[EnvoyFilter]) -> list[ConfigPatch]:
    """The filter's patches with their values parsed, once per push; a patch whose value
    does not parse is reported and left out."""
    memo = push.memo.setdefault(_PARSED_KEY, {})
    assert isinstance(memo, dict)
    found = memo.get(obj.key)
    if found is None:
        found = memo[obj.key] = list(_parse(push, obj))
    return cast(list[ConfigPatch], found)


def _parse(push: PushContext, obj: ConfigObject[EnvoyFilter]) -> list[ConfigPatch]:
    out = []
    for index, cp in enumerate(obj.model.spec.config_patches):
        patch = _one(obj, index, cp)
        if patch is None:
            continue
        problem: str | None = None
        value = None
        if problem is None and cp is not None and cp.patch is not None:
            try:
                if cp.patch.operation != "REMOVE":
                    value = parse_value(patch.apply_to, cp.patch.value)
            except PatchValueError as exc:
                problem = str(exc)
        if problem is not None:
            report(push, patch.problem(problem))
            continue
        out.append(_with_value(patch, value))
    return out


def _one(
    obj: ConfigObject[EnvoyFilter], index: int, cp: EnvoyConfigObjectPatch | None
) -> ConfigPatch | None:
    if cp is None or cp.patch is None:
        return None
    match = cp.match
    return ConfigPatch(
        namespace=obj.namespace,
        name=obj.name,
        index=index,
        apply_to=cp.apply_to,
        operation=cp.patch.operation,
        context=match.context if match else "ANY",
        listener=match.listener if match else None,
        route_configuration=match.route_configuration if match else None,
        cluster=match.cluster if match else None,
        value=None,
        location=obj.location,
    )


def _with_value(patch: ConfigPatch, value: message.Message | None) -> ConfigPatch:
    return replace(patch, value=value)
