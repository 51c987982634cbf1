"""Which xDS types a config change can affect, per proxy type (Istio's `skippedCdsConfigs`,
`UnAffectedConfigKinds` and `proxyDependentOnConfig`), as data tables.

A full push regenerates and resends only the types a change can affect for this proxy; a
proxy for which no type is affected gets nothing. The tables list the kinds that can NOT
affect a type, so a kind added later affects every type until someone proves otherwise
(tests/unit/xds_server/test_relevance.py checks every entry against the generators: removing
all objects of an unaffecting kind leaves that type's output byte for byte the same).

Types are named by Istio's short names (cds, eds, lds, rds, sds, ecds): this package imports no
protobuf.

Scope relevance (Istio's `proxyDependentOnConfig` with the SidecarScope's dependencies):
a change of VirtualServices and DestinationRules alone reaches a sidecar only when one of
the hosts they name (old or new version) is visible to it, and a gateway only when a
VirtualService is bound to one of the Gateways its merged gateway holds (`sees_hosts`).
Other kinds, and DestinationRules for gateways, are not narrowed this way yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from meshpilot.config.hosts import hosts_intersect, resolve_host
from meshpilot.config.istio.destination_rule import DestinationRule
from meshpilot.config.istio.virtual_service import VirtualService
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import NOT_APPLIED_KINDS, Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.indexes.virtual_services import MESH_GATEWAY, resolve_gateway_name
from meshpilot.model.merged_gateway import select_gateways
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.model.visibility import visible_to

__all__ = [
    "ALL_TYPES",
    "UNREAD_KINDS",
    "NamedHost",
    "affected_types",
    "named_hosts",
    "sees_hosts",
    "unaffected_kinds",
]

CDS, EDS, LDS, RDS, SDS, ECDS = "cds", "eds", "lds", "rds", "sds", "ecds"
ALL_TYPES = frozenset({CDS, EDS, LDS, RDS, SDS, ECDS})

# Kinds no generator reads (GitOps bookkeeping, the operator's IstioOperators).
UNREAD_KINDS = frozenset({Kind.APPLICATION, Kind.APP_PROJECT, Kind.ISTIO_OPERATOR})
# Kinds validated but not applied yet are read by no generator either; unlike GitOps
# bookkeeping the store keeps them, so that discovery warns about each of them.
_NEVER = UNREAD_KINDS | NOT_APPLIED_KINDS
# Telemetry (access logs, tracing) lives in the HCMs and tcp_proxies of listeners only.
# WasmPlugins add filters to HCMs (LDS) naming their configs, served by ECDS.
_LDS_ONLY = frozenset({Kind.TELEMETRY, Kind.WASM_PLUGIN})
# ECDS serves WasmPlugin configs and EnvoyFilter EXTENSION_CONFIG values, selected by
# namespace (the mesh's root namespace) and labels.
_NOT_EXTENSIONS = _NEVER | {
    Kind.SERVICE,
    Kind.SERVICE_ENTRY,
    Kind.ENDPOINTS,
    Kind.ENDPOINT_SLICE,
    Kind.WORKLOAD_ENTRY,
    Kind.VIRTUAL_SERVICE,
    Kind.DESTINATION_RULE,
    Kind.GATEWAY,
    Kind.SIDECAR,
    Kind.SECRET,
    Kind.TELEMETRY,
    Kind.PEER_AUTHENTICATION,
    Kind.REQUEST_AUTHENTICATION,
    Kind.AUTHORIZATION_POLICY,
}
# What the routing of a sidecar can never see: gateways and their certificates.
_NOT_SIDECAR_ROUTING = _NEVER | {Kind.GATEWAY, Kind.SECRET}
# SDS serves the secrets a proxy subscribed to by name: only Secrets change them.
_NOT_SECRETS = (
    _NEVER
    | _LDS_ONLY
    | {
        Kind.ENVOY_FILTER,
        Kind.VIRTUAL_SERVICE,
        Kind.DESTINATION_RULE,
        Kind.SIDECAR,
        Kind.GATEWAY,
        Kind.SERVICE,
        Kind.SERVICE_ENTRY,
        Kind.ENDPOINTS,
        Kind.ENDPOINT_SLICE,
        Kind.WORKLOAD_ENTRY,
    }
)

_UNAFFECTED: Mapping[tuple[ProxyType, str], frozenset[Kind]] = {
    # Clusters come from services, DestinationRules and the scope; routes never change them.
    (ProxyType.SIDECAR, CDS): _NOT_SIDECAR_ROUTING | _LDS_ONLY | {Kind.VIRTUAL_SERVICE},
    # EnvoyFilter patches listeners, routes and clusters, never assignments (xds/patch/).
    (ProxyType.SIDECAR, EDS): _NOT_SIDECAR_ROUTING
    | _LDS_ONLY
    | {Kind.VIRTUAL_SERVICE, Kind.ENVOY_FILTER},
    # VirtualServices reach sidecar listeners only through tcp/tls routes: see _l4_only.
    (ProxyType.SIDECAR, LDS): _NOT_SIDECAR_ROUTING,
    (ProxyType.SIDECAR, RDS): _NOT_SIDECAR_ROUTING | _LDS_ONLY,
    (ProxyType.SIDECAR, SDS): _NOT_SECRETS,
    (ProxyType.SIDECAR, ECDS): _NOT_EXTENSIONS,
    # Gateways: the merged Gateway decides clusters too (AUTO_PASSTHROUGH), and LDS names
    # the secrets it needs; only the VirtualService kind never changes their clusters.
    # Sidecar resources never apply to gateways.
    (ProxyType.ROUTER, CDS): _NEVER | _LDS_ONLY | {Kind.VIRTUAL_SERVICE, Kind.SECRET, Kind.SIDECAR},
    (ProxyType.ROUTER, EDS): _NEVER
    | _LDS_ONLY
    | {Kind.VIRTUAL_SERVICE, Kind.SECRET, Kind.SIDECAR, Kind.ENVOY_FILTER},
    (ProxyType.ROUTER, LDS): _NEVER | {Kind.SIDECAR},
    (ProxyType.ROUTER, RDS): _NEVER | _LDS_ONLY | {Kind.SECRET, Kind.SIDECAR},
    (ProxyType.ROUTER, SDS): _NOT_SECRETS,
    (ProxyType.ROUTER, ECDS): _NOT_EXTENSIONS,
}


def unaffected_kinds(proxy_type: ProxyType, xds_type: str) -> frozenset[Kind]:
    return _UNAFFECTED.get((proxy_type, xds_type), frozenset())


def affected_types(
    proxy_type: ProxyType,
    changed: Iterable[ConfigKey],
    before: Mapping[ConfigKey, ConfigObject[Any]],
    after: Mapping[ConfigKey, ConfigObject[Any]],
) -> frozenset[str]:
    """The xDS types whose output `changed` can alter for a proxy of `proxy_type`; `before`
    and `after` hold the objects of the two pushes (a VirtualService is looked at)."""
    keys = list(changed)
    if not keys:
        return ALL_TYPES  # a forced or global push
    out = set()
    for xds_type in sorted(ALL_TYPES):
        skip = unaffected_kinds(proxy_type, xds_type)
        for key in keys:
            if key.kind in skip:
                continue
            if (
                xds_type == LDS
                and proxy_type is ProxyType.SIDECAR
                and _http_only(key, before, after)
            ):
                continue
            out.add(xds_type)
            break
    return frozenset(out)


def _http_only(
    key: ConfigKey,
    before: Mapping[ConfigKey, ConfigObject[Any]],
    after: Mapping[ConfigKey, ConfigObject[Any]],
) -> bool:
    """True for a VirtualService change that a sidecar's listeners cannot see: neither the
    old nor the new version has tcp or tls routes (HTTP routes travel by RDS)."""
    if key.kind is not Kind.VIRTUAL_SERVICE:
        return False
    for version in (before.get(key), after.get(key)):
        if version is None:
            continue
        spec = cast(VirtualService, version.model).spec
        if spec.tcp or spec.tls:
            return False
    return True


# Kinds whose every effect on a sidecar is through the hosts they name.
_HOST_SCOPED = frozenset({Kind.VIRTUAL_SERVICE, Kind.DESTINATION_RULE})


@dataclass(frozen=True, slots=True)
class NamedHost:
    """A host a changed object names (fully qualified), with what decides who sees it."""

    kind: Kind
    host: str
    namespace: str  # the object's
    export_to: tuple[str, ...]  # VirtualServices' exportTo (empty: the mesh default)
    gateways: frozenset[str] = frozenset()  # VirtualServices': "mesh" or "namespace/name"


def named_hosts(
    changed: Iterable[ConfigKey],
    before: Mapping[ConfigKey, ConfigObject[Any]],
    after: Mapping[ConfigKey, ConfigObject[Any]],
    domain_suffix: str,
) -> tuple[NamedHost, ...] | None:
    """The hosts the changed objects name in either version; None when some change is not
    host-scoped (another kind, a delegate VirtualService without hosts, nothing changed)."""
    out: list[NamedHost] = []
    keys = list(changed)
    for key in keys:
        if key.kind not in _HOST_SCOPED:
            return None
        for version in (before.get(key), after.get(key)):
            if version is None:
                continue
            if key.kind is Kind.VIRTUAL_SERVICE:
                vs = cast(VirtualService, version.model).spec
                if not vs.hosts:
                    return None  # a delegate: reached through other VirtualServices
                export = tuple(vs.export_to)
                hosts = [resolve_host(h, key.namespace, domain_suffix) for h in vs.hosts]
                gateways = frozenset(
                    resolve_gateway_name(g, key.namespace) for g in vs.gateways
                ) or frozenset({MESH_GATEWAY})
            else:
                dr = cast(DestinationRule, version.model).spec
                export, hosts = (), [resolve_host(dr.host, key.namespace, domain_suffix)]
                gateways = frozenset()
            out.extend(NamedHost(key.kind, h, key.namespace, export, gateways) for h in hosts)
    return tuple(out) if keys else None


def sees_hosts(push: PushContext, proxy: Proxy, hosts: Iterable[NamedHost]) -> bool:
    """Can any of `hosts` change this proxy's configuration? Sidecars: a VirtualService bound
    to the mesh and exported to the proxy's namespace whose host its scope allows or holds; a
    DestinationRule whose host is a service in its scope or in its own namespace (inbound
    clusters read DestinationRules of the proxy's own services). Gateways: a VirtualService
    exported to the proxy's namespace and bound to a Gateway selecting it; any
    DestinationRule (not narrowed yet)."""
    if proxy.type is not ProxyType.SIDECAR:
        return _gateway_sees(push, proxy, hosts)
    scope = push.proxy_scope(proxy)
    default_export = push.virtual_services.default_export_to
    for named in hosts:
        if named.kind is Kind.VIRTUAL_SERVICE:
            if MESH_GATEWAY not in named.gateways:
                continue
            if not visible_to(named.export_to, named.namespace, proxy.namespace, default_export):
                continue
            if scope.allows_host(named.host, named.namespace):
                return True
            services: Iterable[str] = (s.hostname for s in scope.services)
        else:
            services = [s.hostname for s in scope.services]
            services += [
                s.hostname for s in push.registry.services if s.namespace == proxy.namespace
            ]
        if any(hosts_intersect(named.host, h) for h in services):
            return True
    return False


def _gateway_sees(push: PushContext, proxy: Proxy, hosts: Iterable[NamedHost]) -> bool:
    selected = {f"{gw.namespace}/{gw.name}" for gw in select_gateways(push, proxy)}
    default_export = push.virtual_services.default_export_to
    for named in hosts:
        if named.kind is not Kind.VIRTUAL_SERVICE:
            return True
        if named.gateways & selected and visible_to(
            named.export_to, named.namespace, proxy.namespace, default_export
        ):
            return True
    return False
