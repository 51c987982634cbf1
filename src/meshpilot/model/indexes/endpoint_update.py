"""The registry after a change of Pods alone, updated in place of a rebuild (an endpoint
push should cost what the changed Pods touch, not the whole mesh).

A Pod reaches the registry only as an endpoint of the Kubernetes Services whose selector
matches its labels, in its namespace. So when only Pods changed, the services to recompute
are those whose selector matches the old or the new version of a changed Pod; every other
service keeps its very Service object and endpoint map. (Rebuilding the Pods' namespaces,
as `build_registry` does, matched every Pod of a 300-Pod namespace against each of its 100
selectors: 50-80 ms of an endpoint push at 1000 services.)

Anything this does not model gives None, and the caller rebuilds: Endpoints or
EndpointSlice objects (they find Pods by IP, across namespaces) or a ServiceEntry selecting
a changed Pod. tests/unit/xds_server/test_endpoint_update.py checks the result against a
rebuild.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.pod import Pod
from meshpilot.config.kube.service import Service as KubeService
from meshpilot.config.objects import ConfigObject
from meshpilot.registry.aggregate import Registry, _service_accounts
from meshpilot.registry.kube import kube_endpoints
from meshpilot.registry.model import Service

__all__ = ["update_pods"]

_BY_IP_KINDS = (Kind.ENDPOINTS, Kind.ENDPOINT_SLICE)


def update_pods(
    prev: Registry,
    prev_objects: Mapping[Kind, Sequence[ConfigObject[Any]]],
    prev_by_key: Mapping[ConfigKey, ConfigObject[Any]],
    by_key: Mapping[ConfigKey, ConfigObject[Any]],
    pods: Sequence[ConfigObject[Any]],
    changed: Collection[ConfigKey],
    trust_domain: str,
) -> Registry | None:
    """The registry with the Pods `changed` (keys, all of kind Pod) updated; `pods` are all
    Pods now, `by_key` every object now. None: rebuild instead."""
    if any(key.kind is not Kind.POD for key in changed):
        return None
    if any(prev_objects.get(kind) for kind in _BY_IP_KINDS):
        return None
    touched = [obj for key in changed for obj in (prev_by_key.get(key), by_key.get(key)) if obj]
    namespaces = {key.namespace for key in changed}
    affected = [svc for svc in prev.services if _selects_any(svc, namespaces, touched)]
    if any(not svc.is_kubernetes for svc in affected):
        return None  # a ServiceEntry's workload selector: rebuilt with its WorkloadEntries
    if not affected:
        return prev
    in_namespace = {ns: [p for p in pods if p.namespace == ns] for ns in namespaces}
    endpoints = dict(prev.endpoints)
    renamed: dict[int, Service] = {}  # by id: Services hold dicts, they do not hash
    for svc in affected:
        obj = by_key.get(svc.source or ConfigKey(Kind.SERVICE, svc.namespace, svc.kube_name))
        if obj is None or obj.key.kind is not Kind.SERVICE:
            return None
        eps = kube_endpoints(
            svc,
            cast(ConfigObject[KubeService], obj),
            None,
            (),
            cast(list[ConfigObject[Pod]], in_namespace[svc.namespace]),
            {},
        )
        endpoints[(svc.hostname, svc.namespace)] = eps
        accounts = _service_accounts(svc, eps, trust_domain)
        if accounts != svc.service_accounts:  # a new identity: the Service itself changed
            renamed[id(svc)] = replace(svc, service_accounts=accounts)
    services = prev.services
    by_hostname = prev.by_hostname
    if renamed:
        services = tuple(renamed.get(id(s), s) for s in services)
        by_hostname = {h: tuple(renamed.get(id(s), s) for s in v) for h, v in by_hostname.items()}
    return Registry(services, endpoints, by_hostname)


def _selects_any(
    svc: Service, namespaces: Collection[str], pods: Iterable[ConfigObject[Any]]
) -> bool:
    if not svc.selector or svc.namespace not in namespaces:
        return False
    items = svc.selector.items()
    return any(
        p.namespace == svc.namespace and all(p.labels.get(k) == v for k, v in items) for p in pods
    )
