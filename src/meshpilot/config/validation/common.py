"""Checks shared by several kinds: names, hosts, ports, labels, exportTo, durations, protocols.

Each `*_error` function returns a message (or None) so that callers attach it to the field
they are looking at; each `check_*` function reports into a `Problems` collector directly.
Rules and wording follow Istio's pkg/config/validation (agent.ValidateWildcardDomain,
ValidateFQDN, ValidatePort, labels.Instance.Validate, validateExportTo, ...).
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from meshpilot.config.diagnostics import FieldError, Severity

__all__ = [
    "PROTOCOLS",
    "Path",
    "Problems",
    "check_duration",
    "check_enum",
    "check_export_to",
    "check_labels",
    "check_non_negative",
    "check_percent",
    "check_port",
    "check_selector",
    "check_selector_or_targets",
    "fqdn_error",
    "guarded",
    "ip_or_cidr_error",
    "is_dns1123_label",
    "is_ip",
    "partial_wildcard_error",
    "protocol_error",
    "quoted",
    "unix_address_error",
    "wildcard_domain_error",
]

Path = tuple[str | int, ...]

_LABEL = r"[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?"
_DNS1123_LABEL = re.compile(rf"^{_LABEL}$")
_WILDCARD_LABEL = re.compile(rf"^(?:\*|(?:\*|\*-)?{_LABEL})$")
_QUALIFIED_NAME = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY = re.compile(rf"^(?:({_LABEL}(?:\.{_LABEL})*)/)?({_QUALIFIED_NAME})$")
_LABEL_VALUE = re.compile(rf"^(?:{_QUALIFIED_NAME})?$")
_MS = 1_000_000

# Istio's protocol.Parse, case-insensitive (pkg/config/protocol/instance.go).
PROTOCOLS = frozenset(
    {
        "http",
        "http2",
        "http_proxy",
        "grpc",
        "grpc-web",
        "https",
        "tls",
        "tcp",
        "udp",
        "mongo",
        "mysql",
        "redis",
    }
)


class Problems:
    """The FieldErrors found in one object, in the order they were found."""

    def __init__(self) -> None:
        self.items: list[FieldError] = []

    def error(self, path: Path, message: str) -> None:
        self.items.append(FieldError(path, message))

    def warning(self, path: Path, message: str) -> None:
        self.items.append(FieldError(path, message, Severity.WARNING))

    def add(self, path: Path, message: str | None, severity: Severity = Severity.ERROR) -> None:
        """Record `message` unless it is None (for the `*_error` helpers)."""
        if message is not None:
            self.items.append(FieldError(path, message, severity))


def guarded(validate: Callable[[Any, Problems], None]) -> Callable[[Any], list[FieldError]]:
    """Run a validator; a bug in it becomes one diagnostic instead of a traceback."""

    def run(model: Any) -> list[FieldError]:
        problems = Problems()
        try:
            validate(model, problems)
        except Exception as exc:  # any bug must not stop loading
            problems.error(
                (), f"internal error while validating ({type(exc).__name__}: {exc}); please report"
            )
        return problems.items

    return run


def quoted(text: object) -> str:
    """`"text"`, as Go's %q prints values in Istio's messages."""
    return json.dumps(str(text), ensure_ascii=False)


# --- names and hosts -------------------------------------------------------------------------


def is_dns1123_label(value: str) -> bool:
    return len(value) <= 63 and _DNS1123_LABEL.match(value) is not None


def _dns1123_labels_error(domain: str, labels: str) -> str | None:
    parts = labels.split(".")
    if parts[-1].isdigit():
        return (
            f"domain name {quoted(domain)} invalid (top level "
            f"domain {quoted(parts[-1])} cannot be all-numeric)"
        )
    for index, label in enumerate(parts):
        if index == len(parts) - 1 and label == "":
            return None  # a trailing dot, as in "istio.io."
        if not is_dns1123_label(label):
            return f"domain name {quoted(domain)} invalid (label {quoted(label)} invalid)"
    return None


def _domain_precondition_error(domain: str) -> str | None:
    if not domain:
        return "empty domain name not allowed"
    if len(domain) > 255:
        return f"domain name {quoted(domain[:40])}... too long (max 255)"
    return None


def fqdn_error(domain: str) -> str | None:
    """A DNS name without wildcards (Istio's ValidateFQDN)."""
    return _domain_precondition_error(domain) or _dns1123_labels_error(domain, domain)


def wildcard_domain_error(domain: str) -> str | None:
    """A DNS name whose first label may be a wildcard: `*`, `*.x.com`, `*-x.com` (Istio's
    ValidateWildcardDomain). A `*` anywhere else is invalid."""
    if (err := _domain_precondition_error(domain)) is not None:
        return err
    first, _, rest = domain.partition(".")
    if len(first) > 63 or not _WILDCARD_LABEL.match(first):
        return f"domain name {quoted(domain)} invalid (label {quoted(first)} invalid)"
    return _dns1123_labels_error(domain, rest) if "." in domain else None


def partial_wildcard_error(host: str) -> str | None:
    if "*" in host and host != "*" and not host.startswith("*."):
        return f"partial wildcard {quoted(host)} not allowed"
    return None


def is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def ip_or_cidr_error(value: str) -> str | None:
    """An address in dot-decimal/IPv6 notation or a CIDR block (Istio's ValidateIPSubnet)."""
    if value.count("/") == 1:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            return f"{value} is not a valid CIDR block"
        return None
    return None if is_ip(value) else f"{value} is not a valid IP"


def unix_address_error(path: str) -> str | None:
    if not path:
        return "unix address must not be empty"
    if path.startswith("@"):
        return None  # abstract socket
    if not path.startswith("/") or path.endswith("/"):
        return f"{path} is not an absolute path to a file"
    return None


# --- ports and protocols ---------------------------------------------------------------------


def check_port(p: Problems, path: Path, number: int) -> None:
    if not 1 <= number <= 65535:
        p.error(path, f"port number {number} must be in the range 1..65535")


def protocol_error(protocol: str, *, allow_empty: bool = True) -> str | None:
    if protocol == "" and allow_empty:
        return None
    if protocol.lower() in PROTOCOLS:
        return None
    return (
        f"unsupported protocol {quoted(protocol)}; use one of HTTP, HTTPS, HTTP2, GRPC, GRPC-WEB, "
        "TCP, TLS, MONGO, MYSQL, REDIS (case-insensitive)"
    )


# --- labels and selectors --------------------------------------------------------------------


def check_labels(p: Problems, path: Path, labels: Mapping[str, str]) -> None:
    """Kubernetes label syntax for keys and values (Istio's labels.Instance.Validate)."""
    for key, value in labels.items():
        match = _LABEL_KEY.match(key)
        if match is None:
            p.error((*path, key), f"invalid label key {quoted(key)}")
        elif match.group(1) and len(match.group(1)) > 253:
            p.error((*path, key), f"invalid label key {quoted(key)} (DNS prefix is too long)")
        elif len(match.group(2)) > 63:
            p.error((*path, key), f"invalid label key {quoted(key)} (name is too long)")
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            p.error((*path, key), f"invalid label value {quoted(value)} for key {quoted(key)}")


def check_selector(p: Problems, path: Path, labels: Mapping[str, str], what: str) -> None:
    """A workload selector: no empty keys, no wildcards; without labels it selects everything."""
    for key, value in labels.items():
        if key == "":
            p.error((*path, key), f"empty key is not supported in selector: '={value}'")
        if "*" in key or "*" in value:
            p.error((*path, key), f"wildcard is not supported in selector: '{key}={value}'")
    if not labels:
        p.warning(
            path,
            f"workload selector specified without labels; the {what} applies to every "
            "workload in the namespace",
        )


def check_selector_or_targets(
    p: Problems, selector: Mapping[str, str] | None, target_ref: bool, target_refs: bool, what: str
) -> None:
    """`spec.selector` (its matchLabels), `targetRef` or `targetRefs`: at most one of them."""
    spec: Path = ("spec",)
    if selector is not None:
        if target_ref or target_refs:
            p.error((*spec, "selector"), "only one of targetRefs or selector can be set")
        check_selector(p, (*spec, "selector", "matchLabels"), selector, what)


# --- exportTo --------------------------------------------------------------------------------


def check_export_to(
    p: Problems,
    path: Path,
    values: Sequence[str],
    namespace: str,
    *,
    service_entry: bool = False,
    has_selector: bool = False,
) -> None:
    """Istio's validateExportTo: ".", "*", namespace names, and "~" on ServiceEntries only."""
    seen: set[str] = set()
    for index, value in enumerate(values):
        key = namespace if value == "." else value
        if key in seen:
            p.error((*path, index), _duplicate_export(value, key, namespace))
            continue
        if value == "~" and not service_entry:
            p.error((*path, index), "exportTo ~ (none) is only allowed on ServiceEntry")
        elif value not in (".", "*", "~") and not is_dns1123_label(value):
            p.error(
                (*path, index),
                f"invalid exportTo value {quoted(value)}: use '.', '*', '~' or a namespace name",
            )
        else:
            seen.add(key)
    if has_selector and seen and seen != {namespace}:
        p.error(
            path,
            "destination rule with workload selector cannot have exportTo beyond its own namespace",
        )
    if "*" in seen and len(values) > 1:
        p.error(path, "cannot have both public (*) and non-public exportTo values for a resource")
    if "~" in seen and len(values) > 1:
        p.error(path, "cannot export service entry to no one (~) and someone")


def _duplicate_export(value: str, key: str, namespace: str) -> str:
    if key != value:
        return f"duplicate entries in exportTo: . and current namespace {namespace}"
    return f"duplicate entries in exportTo for entry {value}"


# --- numbers, durations, enums ---------------------------------------------------------------


def check_duration(
    p: Problems, path: Path, nanos: int | None, *, ms_precision: bool = True
) -> None:
    """Istio's ValidateDuration: at least 1ms, and whole milliseconds."""
    if nanos is None:
        return
    if nanos < _MS:
        p.error(path, "duration must be at least 1ms")
    elif ms_precision and nanos % _MS:
        p.error(path, "only durations to ms precision are supported")


def check_percent(p: Problems, path: Path, value: float | None, what: str = "percentage") -> None:
    """A 0..100 percentage (Istio's ValidatePercent / validatePercentage)."""
    if value is None:
        return
    if not math.isfinite(value) or not 0.0 <= value <= 100.0:
        p.error(path, f"{what} {value} is not in range 0..100")
    elif 0.0 < value < 0.0001:
        p.error(path, f"{what} {value} is neither 0.0, nor in range [0.0001, 100.0]")


def check_non_negative(p: Problems, path: Path, value: int | None, what: str) -> None:
    if value is not None and value < 0:
        p.error(path, f"{what} must be non-negative (got {value})")


def check_enum(p: Problems, path: Path, value: str, allowed: Iterable[str]) -> None:
    options = tuple(allowed)
    if value in options:
        return
    hint = " (values are case-sensitive)" if value.upper() in options else ""
    p.error(path, f"invalid value {quoted(value)}; use one of: {', '.join(options)}{hint}")
