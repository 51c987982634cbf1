"""Kubernetes Services and their endpoints (from Endpoints, EndpointSlices or selected Pods)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.pod import Pod
from meshpilot.config.kube.service import Endpoints, EndpointSlice
from meshpilot.config.kube.service import Service as KubeService
from meshpilot.config.objects import ConfigObject
from meshpilot.registry.model import Endpoint, Resolution, Service, ServicePort, protocol_from_name
from meshpilot.registry.workloads import (
    locality_from_labels,
    pod_workload_name,
    tls_mode_from_labels,
)

__all__ = ["kube_endpoints", "kube_service", "pod_ip", "pod_is_ready"]

_SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def kube_service(obj: ConfigObject[KubeService], domain_suffix: str) -> Service | None:
    """A Service object as a registry Service; None for kinds with no mesh meaning."""
    spec = obj.model.spec
    hostname = f"{obj.name}.{obj.namespace}.svc.{domain_suffix}"
    if spec.type == "ExternalName":
        # ExternalName: an alias of another host (Istio ENABLE_EXTERNAL_NAME_ALIAS, on by
        # default since 1.21): no cluster of its own, its names join the target's routes.
        return Service(
            hostname=hostname,
            namespace=obj.namespace,
            kube_name=obj.name,
            ports=_ports(obj),
            resolution=Resolution.DNS_LB,
            mesh_external=True,
            source=obj.key,
            labels=obj.labels,
            export_to=_export_to(obj),
            alias_for=(spec.external_name or "").rstrip(".").lower(),
        )
    ip = spec.cluster_ip
    headless = ip == "None"
    addresses = () if headless or not ip else (ip,)
    return Service(
        hostname=hostname,
        namespace=obj.namespace,
        kube_name=obj.name,
        ports=_ports(obj),
        addresses=addresses,
        resolution=Resolution.PASSTHROUGH if headless else Resolution.CLIENT_SIDE_LB,
        source=obj.key,
        selector=spec.selector,
        labels=obj.labels,
        export_to=_export_to(obj),
    )


def _ports(obj: ConfigObject[KubeService]) -> tuple[ServicePort, ...]:
    ports = []
    for p in obj.model.spec.ports:
        if p.protocol.upper() == "UDP" or p.protocol.upper() == "SCTP":
            continue  # Istio proxies TCP only
        target = p.target_port if isinstance(p.target_port, int) else None
        if p.target_port is None:
            target = p.port
        ports.append(
            ServicePort(p.name, p.port, protocol_from_name(p.name, p.app_protocol), target)
        )
    return tuple(ports)


def _export_to(obj: ConfigObject[KubeService]) -> frozenset[str]:
    value = obj.model.metadata.annotations.get("networking.istio.io/exportTo", "")
    return frozenset(v.strip() for v in value.split(",") if v.strip())


def pod_ip(pod: Pod) -> str | None:
    return pod.status.pod_ip


def pod_is_ready(pod: Pod) -> bool:
    if pod.status.phase not in ("Running", "") or not pod.status.pod_ip:
        return False
    if pod.metadata.deletion_timestamp:
        return False
    for cond in pod.status.conditions:
        if cond.get("type") == "Ready":
            return str(cond.get("status")) == "True"
    return True


def _target_port(port: ServicePort, svc: ConfigObject[KubeService], pod: Pod | None) -> int | None:
    """Resolve a Service port's targetPort (possibly a container port name) for one pod."""
    spec_port = next(p for p in svc.model.spec.ports if p.port == port.port)
    target = spec_port.target_port
    if target is None:
        return port.port
    if isinstance(target, int):
        return target
    if target.isdigit():
        return int(target)
    for container in pod.spec.containers if pod else ():
        for cport in container.ports:
            if cport.name == target:
                return cport.container_port
    return None


def _endpoint(
    svc: Service,
    port: ServicePort,
    address: str,
    target: int,
    pod: ConfigObject[Pod] | None,
    ready: bool,
) -> Endpoint:
    labels = pod.labels if pod else {}
    return Endpoint(
        address=address,
        port=target,
        service_port=port.port,
        labels=labels,
        namespace=pod.namespace if pod else svc.namespace,
        workload_name=pod_workload_name(pod.name, labels) if pod else "",
        service_account=pod.model.service_account_name if pod else "",
        tls_mode=tls_mode_from_labels(labels),
        locality=locality_from_labels(labels),
        healthy=ready,
        node_name=(pod.model.spec.node_name or "") if pod else "",
    )


def kube_endpoints(
    svc: Service,
    svc_obj: ConfigObject[KubeService],
    endpoints: ConfigObject[Endpoints] | None,
    slices: Iterable[ConfigObject[EndpointSlice]],
    pods_in_namespace: Iterable[ConfigObject[Pod]],
    pods_by_ip: dict[str, ConfigObject[Pod]],
) -> dict[int, tuple[Endpoint, ...]]:
    """Endpoints per service port: EndpointSlices, else Endpoints, else Pods by selector."""
    by_port: dict[int, list[Endpoint]] = defaultdict(list)
    slices = list(slices)
    if slices:
        for sl in slices:
            for ep in sl.model.endpoints:
                ready = ep.conditions.ready is not False
                for address in ep.addresses:
                    pod = pods_by_ip.get(address)
                    for port in svc.ports:
                        target = _slice_port(sl.model, port)
                        if target is not None:
                            by_port[port.port].append(
                                _endpoint(svc, port, address, target, pod, ready)
                            )
    elif endpoints is not None:
        for subset in endpoints.model.subsets:
            for ready, addresses in ((True, subset.addresses), (False, subset.not_ready_addresses)):
                for addr in addresses:
                    pod = pods_by_ip.get(addr.ip)
                    for port in svc.ports:
                        target = next(
                            (
                                p.port
                                for p in subset.ports
                                if p.name == port.name or len(subset.ports) == 1
                            ),
                            None,
                        )
                        if target is not None:
                            by_port[port.port].append(
                                _endpoint(svc, port, addr.ip, target, pod, ready)
                            )
    elif svc.selector:
        for pod in pods_in_namespace:
            if not all(pod.labels.get(k) == v for k, v in svc.selector.items()):
                continue
            ip = pod_ip(pod.model)
            if ip is None:
                continue
            for port in svc.ports:
                target = _target_port(port, svc_obj, pod.model)
                if target is not None:
                    by_port[port.port].append(
                        _endpoint(svc, port, ip, target, pod, pod_is_ready(pod.model))
                    )
    return {port: tuple(sorted(eps, key=Endpoint.sort_key)) for port, eps in by_port.items()}


def _slice_port(sl: EndpointSlice, port: ServicePort) -> int | None:
    for p in sl.ports:
        if (p.name or "") == port.name and p.port is not None:
            return p.port
    return None


def slice_service_key(sl: ConfigObject[EndpointSlice]) -> ConfigKey | None:
    name = sl.labels.get(_SERVICE_NAME_LABEL)
    return ConfigKey(Kind.SERVICE, sl.namespace, name) if name else None
