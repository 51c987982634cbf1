"""Which xDS types a config change can affect, per proxy type (Istio's `skippedCdsConfigs`,
`UnAffectedConfigKinds` and `proxyDependentOnConfig`), as data tables.

A full push regenerates and resends only the types a change can affect for this proxy; a
proxy for which no type is affected gets nothing. The tables list the kinds that can NOT
affect a type, so a kind added later affects every type until someone proves otherwise
(tests/unit/xds_server/test_relevance.py checks every entry against the generators: removing
all objects of an unaffecting kind leaves that type's output byte for byte the same).

Types are named by Istio's short names (cds, eds, lds, rds, sds): this package imports no
protobuf.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from meshpilot.config.istio.virtual_service import VirtualService
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.proxy import ProxyType

__all__ = ["ALL_TYPES", "affected_types", "unaffected_kinds"]

CDS, EDS, LDS, RDS, SDS = "cds", "eds", "lds", "rds", "sds"
ALL_TYPES = frozenset({CDS, EDS, LDS, RDS, SDS})

# Kinds no generator reads (GitOps bookkeeping).
_NEVER = frozenset({Kind.APPLICATION, Kind.APP_PROJECT})
# What the routing of a sidecar can never see: gateways and their certificates.
_NOT_SIDECAR_ROUTING = _NEVER | {Kind.GATEWAY, Kind.SECRET}
# SDS serves the secrets a proxy subscribed to by name: only Secrets change them.
_NOT_SECRETS = _NEVER | {
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

_UNAFFECTED: Mapping[tuple[ProxyType, str], frozenset[Kind]] = {
    # Clusters come from services, DestinationRules and the scope; routes never change them.
    (ProxyType.SIDECAR, CDS): _NOT_SIDECAR_ROUTING | {Kind.VIRTUAL_SERVICE},
    (ProxyType.SIDECAR, EDS): _NOT_SIDECAR_ROUTING | {Kind.VIRTUAL_SERVICE},
    # VirtualServices reach sidecar listeners only through tcp/tls routes: see _l4_only.
    (ProxyType.SIDECAR, LDS): _NOT_SIDECAR_ROUTING,
    (ProxyType.SIDECAR, RDS): _NOT_SIDECAR_ROUTING,
    (ProxyType.SIDECAR, SDS): _NOT_SECRETS,
    # Gateways: the merged Gateway decides clusters too (AUTO_PASSTHROUGH), and LDS names
    # the secrets it needs; only the VirtualService kind never changes their clusters.
    # Sidecar resources never apply to gateways.
    (ProxyType.ROUTER, CDS): _NEVER | {Kind.VIRTUAL_SERVICE, Kind.SECRET, Kind.SIDECAR},
    (ProxyType.ROUTER, EDS): _NEVER | {Kind.VIRTUAL_SERVICE, Kind.SECRET, Kind.SIDECAR},
    (ProxyType.ROUTER, LDS): _NEVER | {Kind.SIDECAR},
    (ProxyType.ROUTER, RDS): _NEVER | {Kind.SECRET, Kind.SIDECAR},
    (ProxyType.ROUTER, SDS): _NOT_SECRETS,
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
