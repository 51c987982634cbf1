"""Validation of the Kubernetes objects meshpilot reads: the subset of the API server's rules
that matters to the mesh (Service ports and addresses, Pod IPs, Secret contents, endpoints).
Secret values are never echoed in a message."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable
from typing import Any

from meshpilot.config.diagnostics import FieldError
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.core import Secret
from meshpilot.config.kube.pod import Pod
from meshpilot.config.kube.service import Endpoints, EndpointSlice, Service
from meshpilot.config.validation.common import (
    Problems,
    check_enum,
    check_export_to,
    check_labels,
    check_port,
    guarded,
    is_ip,
    quoted,
)

__all__ = ["VALIDATORS"]

SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
PORT_PROTOCOLS = ("TCP", "UDP", "SCTP")
ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")
EXPORT_TO_ANNOTATION = "networking.istio.io/exportTo"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_IANA_SVC_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_TLS_KEYS = ("tls.crt", "tls.key")


def _port_name_error(name: str, *, service: bool) -> str | None:
    if service:
        if len(name) > 63 or not _DNS_LABEL.match(name):
            return f"invalid port name {quoted(name)}: use a lower case DNS-1123 label"
        return None
    if len(name) > 15 or not _IANA_SVC_NAME.match(name) or "--" in name:
        return (
            f"invalid port name {quoted(name)}: use at most 15 lower case letters, digits and '-'"
        )
    if not any(c.isalpha() for c in name):
        return f"invalid port name {quoted(name)}: it must contain at least one letter"
    return None


def _validate_service(svc: Service, p: Problems) -> None:
    spec = svc.spec
    check_enum(p, ("spec", "type"), spec.type, SERVICE_TYPES)
    check_labels(p, ("metadata", "labels"), svc.metadata.labels)
    check_labels(p, ("spec", "selector"), spec.selector or {})
    if spec.type == "ExternalName" and not spec.external_name:
        p.error(("spec", "externalName"), "externalName is required for type ExternalName")
    if spec.cluster_ip not in (None, "", "None") and not is_ip(spec.cluster_ip):
        p.error(
            ("spec", "clusterIP"), f"clusterIP {quoted(spec.cluster_ip)} must be an IP or 'None'"
        )
    for index, ip in enumerate(spec.cluster_ips):
        if ip != "None" and not is_ip(ip):
            p.error(("spec", "clusterIPs", index), f"clusterIPs entry {quoted(ip)} must be an IP")
    _check_service_ports(p, svc)
    export_to = svc.metadata.annotations.get(EXPORT_TO_ANNOTATION)
    if export_to is not None:
        values = [v.strip() for v in export_to.split(",")]
        check_export_to(
            p,
            ("metadata", "annotations", EXPORT_TO_ANNOTATION),
            values,
            svc.metadata.namespace or "default",
            service_entry=True,
        )


def _check_service_ports(p: Problems, svc: Service) -> None:
    ports = svc.spec.ports
    names: dict[str, int] = {}
    seen: set[tuple[int, str]] = set()
    for index, port in enumerate(ports):
        where = ("spec", "ports", index)
        check_port(p, (*where, "port"), port.port)
        check_enum(p, (*where, "protocol"), port.protocol, PORT_PROTOCOLS)
        if not port.name and len(ports) > 1:
            p.error((*where, "name"), "port name is required when a Service has more than one port")
        elif port.name:
            p.add((*where, "name"), _port_name_error(port.name, service=True))
            if port.name in names:
                p.error(
                    (*where, "name"),
                    f"duplicate port name {quoted(port.name)} (also ports[{names[port.name]}])",
                )
            names.setdefault(port.name, index)
        if (port.port, port.protocol) in seen:
            p.error((*where, "port"), f"duplicate port {port.port}/{port.protocol}")
        seen.add((port.port, port.protocol))
        target = port.target_port
        if isinstance(target, int):
            check_port(p, (*where, "targetPort"), target)
        elif isinstance(target, str) and not target.isdigit():
            p.add((*where, "targetPort"), _port_name_error(target, service=False))
        if port.node_port is not None and port.node_port != 0:
            check_port(p, (*where, "nodePort"), port.node_port)


def _validate_pod(pod: Pod, p: Problems) -> None:
    check_labels(p, ("metadata", "labels"), pod.metadata.labels)
    status = pod.status
    if status.pod_ip and not is_ip(status.pod_ip):
        p.error(("status", "podIP"), f"podIP {quoted(status.pod_ip)} is not a valid IP address")
    for index, entry in enumerate(status.pod_i_ps):
        ip = entry.get("ip", "")
        if not is_ip(ip):
            p.error(
                ("status", "podIPs", index, "ip"), f"podIPs entry {quoted(ip)} is not a valid IP"
            )
    for group, containers in (
        ("containers", pod.spec.containers),
        ("initContainers", pod.spec.init_containers),
    ):
        for c_index, container in enumerate(containers):
            names: set[str] = set()
            for index, port in enumerate(container.ports):
                where = ("spec", group, c_index, "ports", index)
                check_port(p, (*where, "containerPort"), port.container_port)
                if port.name:
                    p.add((*where, "name"), _port_name_error(port.name, service=False))
                    if port.name in names:
                        p.error((*where, "name"), f"duplicate port name {quoted(port.name)}")
                    names.add(port.name)


def _validate_secret(secret: Secret, p: Problems) -> None:
    for key, value in secret.data.items():
        where = ("data", key)
        if not _SECRET_KEY.match(key):
            p.error(where, f"invalid key {quoted(key)}: use letters, digits, '-', '_' and '.'")
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            p.error(
                where, f"the value of {quoted(key)} is not valid base64 (the value is not shown)"
            )
    for key in secret.string_data:
        if not _SECRET_KEY.match(key):
            p.error(
                ("stringData", key),
                f"invalid key {quoted(key)}: use letters, digits, '-', '_' and '.'",
            )
    if secret.type == "kubernetes.io/tls":
        keys = set(secret.data) | set(secret.string_data)
        for key in _TLS_KEYS:
            if key not in keys:
                p.error(
                    ("data",),
                    f"a kubernetes.io/tls Secret needs {quoted(key)} in data or stringData",
                )
        _check_pem(p, secret)


def _check_pem(p: Problems, secret: Secret) -> None:
    for key, marker in (("tls.crt", b"-----BEGIN CERTIFICATE"), ("tls.key", b"-----BEGIN")):
        if key in secret.string_data:
            where, raw = ("stringData", key), secret.string_data[key].encode()
        elif key in secret.data:
            try:
                where, raw = ("data", key), base64.b64decode(secret.data[key], validate=True)
            except (binascii.Error, ValueError):
                continue  # reported above
        else:
            continue
        if marker not in raw:
            p.warning(where, f"{quoted(key)} does not hold PEM data (the value is not shown)")


def _validate_endpoints(endpoints: Endpoints, p: Problems) -> None:
    for s_index, subset in enumerate(endpoints.subsets):
        for field, addresses in (
            ("addresses", subset.addresses),
            ("notReadyAddresses", subset.not_ready_addresses),
        ):
            for index, address in enumerate(addresses):
                if not is_ip(address.ip):
                    p.error(
                        ("subsets", s_index, field, index, "ip"),
                        f"{quoted(address.ip)} is not a valid IP",
                    )
        for index, port in enumerate(subset.ports):
            check_port(p, ("subsets", s_index, "ports", index, "port"), port.port)


def _validate_endpoint_slice(sl: EndpointSlice, p: Problems) -> None:
    check_enum(p, ("addressType",), sl.address_type, ADDRESS_TYPES)
    version = {"IPv4": 4, "IPv6": 6}.get(sl.address_type)
    for e_index, endpoint in enumerate(sl.endpoints):
        for index, address in enumerate(endpoint.addresses):
            if version is not None and _ip_version(address) != version:
                p.error(
                    ("endpoints", e_index, "addresses", index),
                    f"{quoted(address)} is not a valid {sl.address_type} address",
                )
    for index, port in enumerate(sl.ports):
        if port.port is not None:
            check_port(p, ("ports", index, "port"), port.port)


def _ip_version(address: str) -> int:
    try:
        return ipaddress.ip_address(address).version
    except ValueError:
        return 0


VALIDATORS: dict[Kind, Callable[[Any], list[FieldError]]] = {
    Kind.SERVICE: guarded(_validate_service),
    Kind.POD: guarded(_validate_pod),
    Kind.SECRET: guarded(_validate_secret),
    Kind.ENDPOINTS: guarded(_validate_endpoints),
    Kind.ENDPOINT_SLICE: guarded(_validate_endpoint_slice),
}
