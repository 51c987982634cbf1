"""ServiceEntry and WorkloadEntry (Istio's ValidateServiceEntry, ValidateWorkloadEntry,
validateWorkloadEntry)."""

from __future__ import annotations

from collections.abc import Collection

from meshpilot.config.diagnostics import Severity
from meshpilot.config.istio.service_entry import ServiceEntry, WorkloadEntry, WorkloadEntrySpec
from meshpilot.config.validation.common import (
    Path,
    Problems,
    check_enum,
    check_export_to,
    check_labels,
    check_port,
    check_selector,
    fqdn_error,
    ip_or_cidr_error,
    is_dns1123_label,
    is_ip,
    partial_wildcard_error,
    protocol_error,
    quoted,
    unix_address_error,
    wildcard_domain_error,
)

__all__ = ["validate_service_entry", "validate_workload_entry"]

SPEC: Path = ("spec",)
RESOLUTIONS = ("NONE", "STATIC", "DNS", "DNS_ROUND_ROBIN")
LOCATIONS = ("MESH_EXTERNAL", "MESH_INTERNAL")
_UNIX = "unix://"
_HTTP_OR_TLS = frozenset({"http", "http2", "http_proxy", "grpc", "grpc-web", "https", "tls"})


def validate_service_entry(se: ServiceEntry, p: Problems) -> None:
    spec = se.spec
    if spec.workload_selector is not None:
        check_selector(
            p, (*SPEC, "workloadSelector", "labels"), spec.workload_selector.labels, "ServiceEntry"
        )
        if "endpoints" in spec.model_fields_set:
            p.error(SPEC, "only one of workloadSelector or endpoints is allowed in a ServiceEntry")
    _check_hosts(p, se)
    for index, address in enumerate(spec.addresses):
        p.add((*SPEC, "addresses", index), ip_or_cidr_error(address))
    if any("/" in a for a in spec.addresses) and spec.resolution not in ("NONE", "STATIC"):
        p.error((*SPEC, "addresses"), "CIDR addresses are allowed only for NONE/STATIC resolution")
    port_names = _check_ports(p, se)
    check_enum(p, (*SPEC, "location"), spec.location, LOCATIONS)
    check_enum(p, (*SPEC, "resolution"), spec.resolution, RESOLUTIONS)
    _check_resolution(p, se, port_names)
    if spec.resolution != "NONE" and len(spec.hosts) > 1:
        for index, port in enumerate(spec.ports):
            if port.protocol.lower() not in _HTTP_OR_TLS:
                p.error(
                    (*SPEC, "ports", index, "protocol"),
                    "multiple hosts provided with non-HTTP, non-TLS ports: a proxy cannot tell "
                    "the hosts apart (use resolution NONE or one host per ServiceEntry)",
                )
                break
    check_export_to(
        p,
        (*SPEC, "exportTo"),
        spec.export_to,
        se.metadata.namespace or "default",
        service_entry=True,
    )


def _check_hosts(p: Problems, se: ServiceEntry) -> None:
    if not se.spec.hosts:
        p.error((*SPEC, "hosts"), "service entry must have at least one host")
    for index, host in enumerate(se.spec.hosts):
        where = (*SPEC, "hosts", index)
        if host == "*":
            p.error(where, "invalid host *: a ServiceEntry cannot cover every host")
            continue
        p.add(where, wildcard_domain_error(host))
        p.add(where, partial_wildcard_error(host), Severity.WARNING)


def _check_ports(p: Problems, se: ServiceEntry) -> set[str]:
    names: set[str] = set()
    numbers: set[int] = set()
    for index, port in enumerate(se.spec.ports):
        where = (*SPEC, "ports", index)
        if port.name in names:
            p.error(
                (*where, "name"), f"service entry port name {quoted(port.name)} already defined"
            )
        if port.number in numbers:
            p.error((*where, "number"), f"service entry port {port.number} already defined")
        names.add(port.name)
        numbers.add(port.number)
        if not is_dns1123_label(port.name):
            p.error(
                (*where, "name"), f"invalid port name {quoted(port.name)}: use a DNS-1123 label"
            )
        p.add((*where, "protocol"), protocol_error(port.protocol))
        check_port(p, (*where, "number"), port.number)
        if port.target_port:
            check_port(p, (*where, "targetPort"), port.target_port)
            if se.spec.resolution == "NONE":
                p.warning(
                    (*where, "targetPort"), "targetPort has no effect when resolution mode is NONE"
                )
    return names


def _check_resolution(p: Problems, se: ServiceEntry, port_names: set[str]) -> None:
    spec, resolution = se.spec, se.spec.resolution
    if resolution == "NONE":
        if spec.endpoints:
            p.error((*SPEC, "endpoints"), "no endpoints should be provided for resolution NONE")
        if spec.workload_selector is not None:
            p.warning(
                (*SPEC, "workloadSelector"),
                "workloadSelector should not be set when resolution mode is NONE",
            )
    elif resolution == "STATIC":
        if not spec.endpoints and spec.workload_selector is None:
            p.warning(
                (*SPEC, "resolution"),
                "resolution STATIC without endpoints or workloadSelector: the service has no "
                "endpoints",
            )
        for index, endpoint in enumerate(spec.endpoints):
            _check_endpoint(p, (*SPEC, "endpoints", index), endpoint, port_names, dns=False)
    elif resolution in ("DNS", "DNS_ROUND_ROBIN"):
        _check_dns(p, se, port_names)


def _check_dns(p: Problems, se: ServiceEntry, port_names: set[str]) -> None:
    spec = se.spec
    if not spec.endpoints:
        for index, host in enumerate(spec.hosts):
            if host != "*" and fqdn_error(host) is not None and wildcard_domain_error(host) is None:
                p.error(
                    (*SPEC, "hosts", index),
                    f"hosts must be FQDN if no endpoints are provided for resolution mode "
                    f"{spec.resolution}",
                )
    if spec.resolution == "DNS_ROUND_ROBIN" and len(spec.endpoints) > 1:
        p.error(
            (*SPEC, "endpoints"),
            "there must only be 0 or 1 endpoint for resolution DNS_ROUND_ROBIN",
        )
    for index, endpoint in enumerate(spec.endpoints):
        _check_endpoint(p, (*SPEC, "endpoints", index), endpoint, port_names, dns=True)
    if spec.workload_selector is not None:
        p.warning(
            (*SPEC, "workloadSelector"),
            f"workloadSelector should not be set when resolution mode is {spec.resolution}",
        )


def _check_endpoint(
    p: Problems,
    path: Path,
    endpoint: WorkloadEntrySpec,
    port_names: Collection[str] | None,
    *,
    dns: bool,
) -> None:
    """One endpoint; `port_names` are the entry's ports (None for a lone WorkloadEntry), `dns`
    allows host names as addresses."""
    address = endpoint.address
    if not address:
        if endpoint.network:
            p.warning(
                (*path, "address"), f"address is unset with network {quoted(endpoint.network)}"
            )
        else:
            p.error((*path, "address"), "address is required")
    elif address.startswith(_UNIX):
        p.add((*path, "address"), unix_address_error(address.removeprefix(_UNIX)))
        if endpoint.ports:
            p.error((*path, "ports"), f"unix endpoint {address} must not include ports")
        if port_names is not None and len(port_names) != 1:
            p.error((*path, "address"), "exactly 1 service port required for unix endpoints")
    elif not is_ip(address):
        if not dns:
            p.error(
                (*path, "address"), f"endpoint address {quoted(address)} is not a valid IP address"
            )
        elif fqdn_error(address) is not None:
            p.error(
                (*path, "address"),
                f"endpoint address {quoted(address)} is not a valid FQDN or IP address",
            )
    for name, number in endpoint.ports.items():
        where = (*path, "ports", name)
        if port_names is not None and name not in port_names:
            p.error(where, f"endpoint port {quoted(name)} is not defined by the service entry")
        if not is_dns1123_label(name):
            p.error(where, f"invalid port name {quoted(name)}")
        check_port(p, where, number)
    check_labels(p, (*path, "labels"), endpoint.labels)
    if endpoint.weight < 0:
        p.error((*path, "weight"), f"weight must be non-negative (got {endpoint.weight})")


def validate_workload_entry(we: WorkloadEntry, p: Problems) -> None:
    _check_endpoint(p, SPEC, we.spec, None, dns=True)
