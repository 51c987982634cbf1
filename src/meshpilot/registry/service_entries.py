"""ServiceEntry hosts as registry Services, with endpoints from the entry, WorkloadEntries, Pods."""

from __future__ import annotations

from collections.abc import Iterable

from meshpilot.config.istio.service_entry import ServiceEntry, WorkloadEntry, WorkloadEntrySpec
from meshpilot.config.kube.pod import Pod
from meshpilot.config.objects import ConfigObject
from meshpilot.registry.kube import pod_ip, pod_is_ready
from meshpilot.registry.model import (
    Endpoint,
    Locality,
    Resolution,
    Service,
    ServicePort,
    parse_protocol,
)
from meshpilot.registry.workloads import (
    locality_from_labels,
    pod_workload_name,
    tls_mode_from_labels,
)

__all__ = ["service_entry_services"]

_RESOLUTION = {
    "NONE": Resolution.PASSTHROUGH,
    "STATIC": Resolution.CLIENT_SIDE_LB,
    "DNS": Resolution.DNS_LB,
    "DNS_ROUND_ROBIN": Resolution.DNS_ROUND_ROBIN,
}


def service_entry_services(
    obj: ConfigObject[ServiceEntry],
    workload_entries: Iterable[ConfigObject[WorkloadEntry]],
    pods: Iterable[ConfigObject[Pod]],
) -> list[tuple[Service, dict[int, tuple[Endpoint, ...]]]]:
    """One Service per host of the entry, each with its endpoints per port."""
    spec = obj.model.spec
    resolution = _RESOLUTION.get(spec.resolution, Resolution.PASSTHROUGH)
    ports = tuple(
        ServicePort(p.name, p.number, parse_protocol(p.protocol), p.target_port or None)
        for p in spec.ports
    )
    export_to = frozenset(spec.export_to)
    selector = spec.workload_selector.labels if spec.workload_selector else None
    out = []
    for host in spec.hosts:
        svc = Service(
            hostname=host,
            namespace=obj.namespace,
            ports=ports,
            addresses=tuple(spec.addresses),
            resolution=resolution,
            mesh_external=spec.location != "MESH_INTERNAL",
            export_to=export_to,
            source=obj.key,
            selector=selector,
            service_accounts=tuple(spec.subject_alt_names),
            labels=obj.labels,
        )
        endpoints: dict[int, tuple[Endpoint, ...]] = {}
        for port in ports:
            eps = [_entry_endpoint(svc, port, e, "", "") for e in spec.endpoints]
            if selector is not None:
                eps.extend(_selected(svc, port, selector, workload_entries, pods))
            if (
                not eps
                and not spec.endpoints
                and resolution in (Resolution.DNS_LB, Resolution.DNS_ROUND_ROBIN)
            ) and "*" not in host:  # Envoy resolves the host itself
                eps.append(
                    Endpoint(
                        address=host,
                        port=port.target_port or port.port,
                        service_port=port.port,
                        namespace=obj.namespace,
                    )
                )
            endpoints[port.port] = tuple(sorted(eps, key=Endpoint.sort_key))
        out.append((svc, endpoints))
    return out


def _entry_endpoint(
    svc: Service, port: ServicePort, spec: WorkloadEntrySpec, name: str, namespace: str
) -> Endpoint:
    target = spec.ports.get(port.name) or port.target_port or port.port
    address = spec.address or svc.hostname
    return Endpoint(
        address=address,
        port=target,
        service_port=port.port,
        labels=dict(spec.labels),
        namespace=namespace or svc.namespace,
        workload_name=name,
        service_account=spec.service_account,
        tls_mode=tls_mode_from_labels(spec.labels),
        locality=Locality.parse(spec.locality) if spec.locality else Locality(),
        weight=spec.weight or 1,
        network=spec.network,
    )


def _selected(
    svc: Service,
    port: ServicePort,
    selector: dict[str, str],
    workload_entries: Iterable[ConfigObject[WorkloadEntry]],
    pods: Iterable[ConfigObject[Pod]],
) -> list[Endpoint]:
    eps: list[Endpoint] = []
    for we in workload_entries:
        if we.namespace == svc.namespace and _matches(selector, we.model.spec.labels):
            eps.append(_entry_endpoint(svc, port, we.model.spec, we.name, we.namespace))
    for pod in pods:
        ip = pod_ip(pod.model)
        if pod.namespace != svc.namespace or ip is None or not _matches(selector, pod.labels):
            continue
        eps.append(
            Endpoint(
                address=ip,
                port=port.target_port or port.port,
                service_port=port.port,
                labels=pod.labels,
                namespace=pod.namespace,
                workload_name=pod_workload_name(pod.name, pod.labels),
                service_account=pod.model.service_account_name,
                tls_mode=tls_mode_from_labels(pod.labels),
                locality=locality_from_labels(pod.labels),
                healthy=pod_is_ready(pod.model),
            )
        )
    return eps


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())
