"""WorkloadGroup: metadata, the WorkloadEntry template (without an address) and the readiness
probe (Istio's ValidateWorkloadGroup and validateReadinessProbe)."""

from __future__ import annotations

import re

from meshpilot.config.istio.service_entry import WorkloadEntrySpec
from meshpilot.config.istio.workload_group import ReadinessProbe, WorkloadGroup
from meshpilot.config.validation.common import (
    Path,
    Problems,
    check_labels,
    check_port,
    is_dns1123_label,
    quoted,
)

__all__ = ["validate_workload_group"]

SPEC: Path = ("spec",)
_SCHEMES = ("", "HTTP", "HTTPS")
_HEADER_NAME = re.compile(r"[-_A-Za-z0-9]+")  # HTTPHeader.name in Istio's CRD schema
_COUNTS = (
    ("initialDelaySeconds", "initial_delay_seconds"),
    ("timeoutSeconds", "timeout_seconds"),
    ("periodSeconds", "period_seconds"),
    ("successThreshold", "success_threshold"),
    ("failureThreshold", "failure_threshold"),
)


def validate_workload_group(group: WorkloadGroup, p: Problems) -> None:
    spec = group.spec
    if spec.metadata is not None:
        check_labels(p, (*SPEC, "metadata", "labels"), spec.metadata.labels)
    if spec.template is None:
        p.error((*SPEC, "template"), "template is required")
    else:
        _check_template(p, (*SPEC, "template"), spec.template)
    if spec.probe is not None:
        _check_probe(p, (*SPEC, "probe"), spec.probe)


def _check_template(p: Problems, path: Path, template: WorkloadEntrySpec) -> None:
    if template.address:
        p.error((*path, "address"), "cannot have address set in template")
    for name, number in template.ports.items():
        where = (*path, "ports", name)
        if not is_dns1123_label(name):
            p.error(where, f"invalid port name {quoted(name)}")
        check_port(p, where, number)
    check_labels(p, (*path, "labels"), template.labels)
    if template.weight < 0:
        p.error((*path, "weight"), f"weight must be non-negative (got {template.weight})")


def _check_probe(p: Problems, path: Path, probe: ReadinessProbe) -> None:
    for field, attribute in _COUNTS:
        value = getattr(probe, attribute)
        if value < 0:
            p.error((*path, field), f"{field} must be non-negative (got {value})")
    methods = [
        name
        for name, method in (
            ("httpGet", probe.http_get),
            ("tcpSocket", probe.tcp_socket),
            ("exec", probe.exec),
            ("grpc", probe.grpc),
        )
        if method is not None
    ]
    if len(methods) != 1:
        p.error(path, "a probe must set exactly one of httpGet, tcpSocket, exec or grpc")
    if probe.http_get is not None:
        where = (*path, "httpGet")
        check_port(p, (*where, "port"), probe.http_get.port)
        if probe.http_get.scheme not in _SCHEMES:
            p.error(
                (*where, "scheme"),
                f"httpGet.scheme must be HTTP or HTTPS (got {quoted(probe.http_get.scheme)})",
            )
        for index, header in enumerate(probe.http_get.http_headers):
            if not header.name:
                p.error((*where, "httpHeaders", index, "name"), "header name must not be empty")
            elif not _HEADER_NAME.fullmatch(header.name):
                p.error(
                    (*where, "httpHeaders", index, "name"),
                    f"invalid header name {quoted(header.name)}: use letters, digits, '-' and '_'",
                )
    if probe.tcp_socket is not None:
        check_port(p, (*path, "tcpSocket", "port"), probe.tcp_socket.port)
    if probe.grpc is not None:
        check_port(p, (*path, "grpc", "port"), probe.grpc.port)
    if probe.exec is not None and not probe.exec.command:
        p.error((*path, "exec", "command"), "exec.command is required")
