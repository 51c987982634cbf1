"""Questions several analyzers ask of a PushContext: which services cover a host, which
workloads a selector picks, where a VirtualService's destinations are."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from meshpilot.analysis.findings import Path
from meshpilot.config.hosts import host_matches, hosts_intersect
from meshpilot.config.istio.virtual_service import Destination, VirtualService
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext
from meshpilot.model.visibility import visible_to
from meshpilot.registry.aggregate import Registry
from meshpilot.registry.model import Endpoint, Service

__all__ = [
    "RouteDestination",
    "Workload",
    "endpoint_labels",
    "find_services",
    "gateway_key",
    "route_destinations",
    "selector_matches",
    "selector_text",
    "services_intersecting",
    "workloads",
]

# The last registry's wildcard services: every analyzer asks per host, and a scan of all
# services per question made the analysis quadratic (1000 apps: seconds per mesh change).
_wildcards: tuple[Registry | None, tuple[Service, ...]] = (None, ())


@dataclass(frozen=True, slots=True)
class Workload:
    """A Pod or WorkloadEntry: what selectors pick."""

    kind: str
    namespace: str
    name: str
    labels: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class RouteDestination:
    """A destination of a VirtualService with the path of its Destination message."""

    path: Path
    destination: Destination
    mirror: bool


def find_services(push: PushContext, host: str, namespaces: Iterable[str] | None) -> list[Service]:
    """Services whose hostname covers `host` (exactly, or by a wildcard ServiceEntry host),
    visible from one of `namespaces` (any namespace if None). Exact matches come first."""
    scope = None if namespaces is None else set(namespaces)
    default = push.mesh.default_service_export_to
    exact = list(push.registry.services_for_host(host))
    wildcard = [
        s
        for s in wildcard_services(push.registry)
        if s.hostname != host and host_matches(s.hostname, host)
    ]
    return [
        s
        for s in exact + wildcard
        if scope is None or any(visible_to(s.export_to, s.namespace, ns, default) for ns in scope)
    ]


def services_intersecting(push: PushContext, host: str) -> list[Service]:
    """Services whose hostname covers `host` or is covered by it, in registry order."""
    registry = push.registry
    if host.startswith("*"):  # a wildcard can cover any name: look at them all
        return [s for s in registry.services if hosts_intersect(s.hostname, host)]
    found = [*registry.services_for_host(host)]
    found += [
        s
        for s in wildcard_services(registry)
        if s.hostname != host and host_matches(s.hostname, host)
    ]
    return sorted(found, key=lambda s: (s.hostname, s.namespace))


def wildcard_services(registry: Registry) -> tuple[Service, ...]:
    global _wildcards
    cached, services = _wildcards
    if cached is not registry:
        services = tuple(s for s in registry.services if s.hostname.startswith("*"))
        _wildcards = (registry, services)
    return services


def selector_matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def selector_text(selector: Mapping[str, str]) -> str:
    """`a=1,b=2`, as Kubernetes prints a label selector."""
    return ",".join(f"{key}={selector[key]}" for key in sorted(selector))


def workloads(push: PushContext) -> list[Workload]:
    found = [Workload("Pod", o.namespace, o.name, o.labels) for o in push.of_kind(Kind.POD)]
    found.extend(
        Workload("WorkloadEntry", o.namespace, o.name, {**o.labels, **o.model.spec.labels})
        for o in push.of_kind(Kind.WORKLOAD_ENTRY)
    )
    return found


def endpoint_labels(endpoint: Endpoint) -> dict[str, str]:
    """An endpoint's labels plus the topology labels Istio adds from its locality and node."""
    labels = dict(endpoint.labels)
    for key, value in (
        ("topology.kubernetes.io/region", endpoint.locality.region),
        ("topology.kubernetes.io/zone", endpoint.locality.zone),
        ("topology.istio.io/subzone", endpoint.locality.subzone),
        ("kubernetes.io/hostname", endpoint.node_name),
    ):
        if value:
            labels.setdefault(key, value)
    return labels


def gateway_key(reference: str, namespace: str) -> tuple[str, str]:
    """(namespace, name) of a gateway reference: `ns/name`, legacy `name.ns`, or `name`."""
    ns, slash, name = reference.partition("/")
    if slash:
        return (namespace if ns == "." else ns, name)
    if "." in reference:
        name, _, rest = reference.partition(".")
        return (rest.split(".")[0], name)
    return (namespace, reference)


def route_destinations(vs: ConfigObject[VirtualService]) -> Iterator[RouteDestination]:
    """Every route and mirror destination, with the path of its Destination."""
    spec = vs.model.spec
    for index, http in enumerate(spec.http):
        base: Path = ("spec", "http", index)
        for r_index, route in enumerate(http.route):
            yield RouteDestination(
                (*base, "route", r_index, "destination"), route.destination, False
            )
        if http.mirror is not None:
            yield RouteDestination((*base, "mirror"), http.mirror, True)
        for m_index, mirror in enumerate(http.mirrors):
            yield RouteDestination(
                (*base, "mirrors", m_index, "destination"), mirror.destination, True
            )
    l4_routes = [("tls", i, r.route) for i, r in enumerate(spec.tls)]
    l4_routes += [("tcp", i, r.route) for i, r in enumerate(spec.tcp)]
    for field, index, routes in l4_routes:
        for r_index, dest in enumerate(routes):
            path: Path = ("spec", field, index, "route", r_index, "destination")
            yield RouteDestination(path, dest.destination, False)
