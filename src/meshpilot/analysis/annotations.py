"""Istio annotations on Namespaces, Services and Pods (Istio's annotations.K8sAnalyzer): unknown
(IST0108), deprecated (IST0135, Info), on the wrong kind (IST0107), or with a value the
injector rejects (IST0125)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from typing import Any

import yaml
from pydantic import ValidationError

from meshpilot.analysis.annotation_table import ANNOTATIONS
from meshpilot.analysis.findings import finding, quoted
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.kinds import Kind
from meshpilot.config.mesh import ProxyConfig
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["annotation_problem", "check_annotations"]

_KINDS = (Kind.NAMESPACE, Kind.SERVICE, Kind.POD)
_INJECT = "sidecar.istio.io/inject"
_DEPRECATION_EXTRA = {_INJECT: f' in favor of the "{_INJECT}" label'}


def check_annotations(push: PushContext) -> Iterator[Diagnostic]:
    for kind in _KINDS:
        for obj in push.of_kind(kind):
            yield from _check_object(obj, str(kind))


def _istio_annotation(name: str) -> bool:
    return name == "kubernetes.io/ingress.class" or name.split("/")[0].endswith("istio.io")


def _check_object(obj: ConfigObject[Any], kind: str) -> Iterator[Diagnostic]:
    meta = obj.model.metadata
    for name, value in sorted(meta.annotations.items()):
        if not _istio_annotation(name):
            continue
        path = ("metadata", "annotations", name)
        definition = ANNOTATIONS.get(name)
        if definition is None:
            yield finding(obj, path, f"Unknown annotation: {name}", code="IST0108")
            continue
        # Both the annotation and its replacement label: the user keeps both on purpose.
        if definition.deprecated and not (name == _INJECT and _INJECT in meta.labels):
            yield finding(
                obj,
                path,
                f"Annotation {quoted(name)} has been deprecated"
                f"{_DEPRECATION_EXTRA.get(name, '')} and may not work in future Istio versions.",
                code="IST0135",
            )
        if "Any" in definition.resources:
            continue
        if kind not in definition.resources:
            yield finding(
                obj,
                path,
                f"Misplaced annotation: {name} can only be applied to "
                f"{', '.join(definition.resources)}",
                code="IST0107",
            )
            continue
        problem = annotation_problem(name, str(value))
        if problem:
            yield finding(obj, path, f"Invalid annotation {name}: {problem}", code="IST0125")


def annotation_problem(name: str, value: str) -> str:
    """Why the injector would reject this value ("" if it would not), in Istio's words."""
    check = _VALIDATORS.get(name)
    return check(value) if check else ""


def _interception_mode(value: str) -> str:
    if value in ("REDIRECT", "TPROXY", "NONE"):
        return ""
    return f"interceptionMode invalid, use REDIRECT,TPROXY,NONE: {value}"


def _parse_uint(value: str, bits: int) -> str:
    text = value.strip()
    if not text.isascii() or not text.isdigit():
        return f"strconv.ParseUint: parsing {quoted(text)}: invalid syntax"
    if int(text) >= 1 << bits:
        return f"strconv.ParseUint: parsing {quoted(text)}: value out of range"
    return ""


def _ports(parameter: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if parameter == "includeInboundPorts" and value == "*":
            return ""
        for port in value.strip().split(",") if value.strip() else []:
            problem = _parse_uint(port, 16)
            if problem:
                return (
                    f"{parameter} invalid: failed parsing port '{port}': failed parsing port "
                    f"'{port}': {problem}"
                )
        return ""

    return check


def _cidrs(parameter: str, star: bool) -> Callable[[str], str]:
    def check(value: str) -> str:
        if star and value == "*":
            return ""
        for cidr in value.split(",") if value else []:
            try:
                if "/" not in cidr:
                    raise ValueError("no '/'")
                ipaddress.ip_network(cidr, strict=False)
            except ValueError as exc:
                return f"{parameter} invalid: failed parsing cidr '{cidr}': {exc}"
        return ""

    return check


def _status_port(value: str) -> str:
    problem = _parse_uint(value, 16)
    return (
        f"excludeInboundPorts invalid: failed parsing port '{value}': {problem}" if problem else ""
    )


def _bool(value: str) -> str:
    if value in ("1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"):
        return ""
    return f"strconv.ParseBool: parsing {quoted(value)}: invalid syntax"


def _proxy_config(value: str) -> str:
    try:
        data = yaml.safe_load(value) or {}
        ProxyConfig.model_validate(data)
    except (yaml.YAMLError, ValidationError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"failed to convert to apply proxy config: {first}"
    return ""


_VALIDATORS: dict[str, Callable[[str], str]] = {
    "sidecar.istio.io/interceptionMode": _interception_mode,
    "status.sidecar.istio.io/port": _status_port,
    "readiness.status.sidecar.istio.io/initialDelaySeconds": lambda v: _parse_uint(v, 32),
    "readiness.status.sidecar.istio.io/periodSeconds": lambda v: _parse_uint(v, 32),
    "readiness.status.sidecar.istio.io/failureThreshold": lambda v: _parse_uint(v, 32),
    "traffic.sidecar.istio.io/includeOutboundIPRanges": _cidrs("includeIPRanges", star=True),
    "traffic.sidecar.istio.io/excludeOutboundIPRanges": _cidrs("excludeIPRanges", star=False),
    "traffic.sidecar.istio.io/includeInboundPorts": _ports("includeInboundPorts"),
    "traffic.sidecar.istio.io/excludeInboundPorts": _ports("excludeInboundPorts"),
    "traffic.sidecar.istio.io/excludeOutboundPorts": _ports("excludeOutboundPorts"),
    "prometheus.istio.io/merge-metrics": _bool,
    "proxy.istio.io/config": _proxy_config,
}
