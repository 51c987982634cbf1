"""The whole service registry built from one set of input objects."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from meshpilot.config.istio.service_entry import ServiceEntry, WorkloadEntry
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.pod import Pod
from meshpilot.config.kube.service import Endpoints, EndpointSlice
from meshpilot.config.kube.service import Service as KubeService
from meshpilot.config.objects import ConfigObject
from meshpilot.registry.kube import kube_endpoints, kube_service, pod_ip, slice_service_key
from meshpilot.registry.model import Endpoint, Service
from meshpilot.registry.service_entries import service_entry_services

__all__ = ["Registry", "ServiceKey", "build_registry"]

ServiceKey = tuple[str, str]  # (hostname, namespace)
EMPTY: tuple[Endpoint, ...] = ()


@dataclass(frozen=True, slots=True)
class Registry:
    services: tuple[Service, ...] = ()
    endpoints: Mapping[ServiceKey, Mapping[int, tuple[Endpoint, ...]]] = field(default_factory=dict)
    by_hostname: Mapping[str, tuple[Service, ...]] = field(default_factory=dict)

    def endpoints_of(self, svc: Service, port: int) -> tuple[Endpoint, ...]:
        return self.endpoints.get((svc.hostname, svc.namespace), {}).get(port, EMPTY)

    def services_for_host(self, hostname: str) -> tuple[Service, ...]:
        return self.by_hostname.get(hostname, ())


def build_registry(
    objects: Sequence[ConfigObject[Any]],
    domain_suffix: str = "cluster.local",
    trust_domain: str = "cluster.local",
    prev: Registry | None = None,
    changed: Collection[ConfigKey] | None = None,
) -> Registry:
    """The registry of `objects`. Given the previous registry and the keys changed since,
    a change of Pods alone recomputes only the services of the Pods' namespaces (Services and
    ServiceEntries select workloads of their own namespace); everything else is shared."""
    by_kind: dict[Kind, list[ConfigObject[Any]]] = defaultdict(list)
    for obj in objects:
        by_kind[obj.key.kind].append(obj)
    redo = _namespaces_to_redo(by_kind, prev, changed)
    services, endpoints = _services(by_kind, redo, domain_suffix, trust_domain)
    if prev is not None and redo is not None:
        for svc in prev.services:
            if svc.namespace not in redo:
                key = (svc.hostname, svc.namespace)
                services.append(svc)
                endpoints[key] = prev.endpoints.get(key, {})
    services.sort(key=lambda s: (s.hostname, s.namespace))
    by_hostname: dict[str, list[Service]] = defaultdict(list)
    for svc in services:
        by_hostname[svc.hostname].append(svc)
    return Registry(tuple(services), endpoints, {h: tuple(v) for h, v in by_hostname.items()})


def _namespaces_to_redo(
    by_kind: Mapping[Kind, Sequence[ConfigObject[Any]]],
    prev: Registry | None,
    changed: Collection[ConfigKey] | None,
) -> frozenset[str] | None:
    """The namespaces to recompute, or None for all of them."""
    if prev is None or changed is None or any(k.kind is not Kind.POD for k in changed):
        return None
    # Endpoints and EndpointSlices find pods by IP, possibly across namespaces.
    if by_kind.get(Kind.ENDPOINTS) or by_kind.get(Kind.ENDPOINT_SLICE):
        return None
    return frozenset(k.namespace for k in changed)


def _services(
    by_kind: Mapping[Kind, Sequence[ConfigObject[Any]]],
    namespaces: frozenset[str] | None,
    domain_suffix: str,
    trust_domain: str,
) -> tuple[list[Service], dict[ServiceKey, Mapping[int, tuple[Endpoint, ...]]]]:
    """Services and their endpoints from the objects of `namespaces` (None: all)."""

    def of(kind: Kind) -> list[ConfigObject[Any]]:
        objs = by_kind.get(kind, [])
        return list(objs) if namespaces is None else [o for o in objs if o.namespace in namespaces]

    pods = cast(list[ConfigObject[Pod]], list(by_kind.get(Kind.POD, [])))
    pods_by_ip = {ip: p for p in pods if (ip := pod_ip(p.model))}
    pods_by_ns: dict[str, list[ConfigObject[Pod]]] = defaultdict(list)
    for pod in pods:
        pods_by_ns[pod.namespace].append(pod)
    endpoints_by_key = {
        ConfigKey(Kind.SERVICE, o.namespace, o.name): o
        for o in cast(list[ConfigObject[Endpoints]], of(Kind.ENDPOINTS))
    }
    slices: dict[ConfigKey, list[ConfigObject[EndpointSlice]]] = defaultdict(list)
    for sl in cast(list[ConfigObject[EndpointSlice]], of(Kind.ENDPOINT_SLICE)):
        if (svc_key := slice_service_key(sl)) is not None:
            slices[svc_key].append(sl)

    services: list[Service] = []
    endpoints: dict[ServiceKey, Mapping[int, tuple[Endpoint, ...]]] = {}
    for obj in cast(list[ConfigObject[KubeService]], of(Kind.SERVICE)):
        svc = kube_service(obj, domain_suffix)
        if svc is None:
            continue
        eps = kube_endpoints(
            svc,
            obj,
            endpoints_by_key.get(obj.key),
            slices.get(obj.key, ()),
            pods_by_ns[obj.namespace],
            pods_by_ip,
        )
        svc = replace(svc, service_accounts=_service_accounts(svc, eps, trust_domain))
        services.append(svc)
        endpoints[(svc.hostname, svc.namespace)] = eps
    workload_entries = cast(
        list[ConfigObject[WorkloadEntry]], list(by_kind.get(Kind.WORKLOAD_ENTRY, []))
    )
    for se in cast(list[ConfigObject[ServiceEntry]], of(Kind.SERVICE_ENTRY)):
        for svc, eps in service_entry_services(se, workload_entries, pods_by_ns[se.namespace]):
            key = (svc.hostname, svc.namespace)
            if key in endpoints:
                continue  # a Service or an earlier entry owns this host in this namespace
            if not svc.mesh_external:
                svc = replace(
                    svc,
                    service_accounts=tuple(
                        sorted({*svc.service_accounts, *_service_accounts(svc, eps, trust_domain)})
                    ),
                )
            services.append(svc)
            endpoints[key] = eps
    return services, endpoints


def _service_accounts(
    svc: Service, eps: Mapping[int, tuple[Endpoint, ...]], trust_domain: str
) -> tuple[str, ...]:
    """SPIFFE identities of the workloads behind a service (for SAN verification)."""
    accounts = {
        f"spiffe://{trust_domain}/ns/{ep.namespace}/sa/{ep.service_account}"
        for port_eps in eps.values()
        for ep in port_eps
        if ep.service_account
    }
    return tuple(sorted(accounts))
