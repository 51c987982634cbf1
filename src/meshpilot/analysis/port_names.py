"""Ports whose protocol Istio has to guess: Service ports whose name (or appProtocol) does not
declare one (IST0118, Info; IST0150 for ExternalName services) and ServiceEntry ports without
a protocol (meshpilot's MP0007)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from meshpilot.analysis.findings import finding
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Protocol, protocol_from_name

__all__ = ["check_port_names"]

# Namespaces Istio never injects, and so never analyzes (inject.IgnoredNamespaces).
SYSTEM_NAMESPACES = frozenset(
    {"kube-system", "kube-public", "kube-node-lease", "local-path-storage"}
)


def check_port_names(push: PushContext) -> Iterator[Diagnostic]:
    for svc in push.of_kind(Kind.SERVICE):
        if svc.namespace in SYSTEM_NAMESPACES or _is_control_plane(svc):
            continue
        yield from _check_service(svc)
    for entry in push.of_kind(Kind.SERVICE_ENTRY):
        for index, port in enumerate(entry.model.spec.ports):
            if not port.protocol:
                yield finding(
                    entry,
                    ("spec", "ports", index, "protocol"),
                    f"port {port.name} ({port.number}) declares no protocol, so the proxy "
                    "detects it from the traffic; declare it (HTTP, HTTPS, TCP, ...)",
                    code="MP0007",
                )


def _is_control_plane(svc: ConfigObject[Any]) -> bool:
    return "istio" in svc.labels or svc.labels.get("release") == "istio"


def _check_service(svc: ConfigObject[Any]) -> Iterator[Diagnostic]:
    spec = svc.model.spec
    external = spec.type == "ExternalName"
    for index, port in enumerate(spec.ports):
        if port.protocol.upper() != "TCP":
            continue  # UDP and SCTP are not proxied; their names do not matter
        guessed = protocol_from_name(port.name, port.app_protocol) is Protocol.AUTO
        if external and (guessed or port.name == "tcp"):
            yield finding(
                svc,
                ("spec", "ports", index),
                "Port name for ExternalName service is invalid. Proxy may prevent tcp named "
                "ports and unmatched traffic for ports serving TCP protocol from being "
                "forwarded correctly",
                code="IST0150",
            )
        elif guessed:
            target = port.target_port if port.target_port is not None else port.port
            yield finding(
                svc,
                ("spec", "ports", index),
                f"Port name {port.name} (port: {port.port}, targetPort: {target}) doesn't "
                "follow the naming convention of Istio port.",
                code="IST0118",
            )
