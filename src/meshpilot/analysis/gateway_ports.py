"""Gateway server ports that the gateway's workloads do not offer.

- IST0162 (Istio's gateway.IngressGatewayPortAnalyzer): the port is neither a port nor a
  targetPort of a TCP Service selecting the gateway's Pods, so the Service does not lead to
  it. Istio compares target ports only; a Service port counts here too because the gateway
  listens on that port's targetPort then (gateway port translation, as in Istio). Not
  reported when no Service selects the Pods: in universal mode they are reached directly.
- IST0104 (the same analyzer in Istio before 1.12): the port the proxy listens on (after
  translation) is not among the containerPorts the gateway's Pods declare, when they
  declare any.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from meshpilot.analysis.findings import finding
from meshpilot.analysis.lookup import selector_matches, selector_text
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["check_gateway_ports"]


def check_gateway_ports(push: PushContext) -> Iterator[Diagnostic]:
    services = push.of_kind(Kind.SERVICE)
    pods = push.of_kind(Kind.POD)
    for gateway in push.of_kind(Kind.GATEWAY):
        selector = gateway.model.spec.selector
        selected = [p for p in pods if selector_matches(selector, p.labels)]
        if not selected:
            continue  # IST0101 selector (gateways.py)
        translated: dict[int, int] = {}  # Service port -> targetPort
        for svc in services:
            svc_selector = svc.model.spec.selector
            if not svc_selector or not any(
                p.namespace == svc.namespace and selector_matches(svc_selector, p.labels)
                for p in selected
            ):
                continue
            for port in svc.model.spec.ports:
                if port.protocol == "TCP":
                    target = port.target_port
                    if isinstance(target, str):  # a named port of the Pods' containers
                        target = _named_port(selected, target)
                    translated[port.port] = target or port.port
        declared = _container_ports(selected)
        path_first = sorted(selector)[0] if selector else None
        for index, server in enumerate(gateway.model.spec.servers):
            number = server.port.number
            path = ("spec", "servers", index, "port", "number")
            if translated and number not in translated and number not in translated.values():
                yield finding(
                    gateway,
                    ("spec", "selector", path_first) if path_first else path,
                    f"The gateway is listening on a target port (port {number}) that is not "
                    "defined in the Service associated with its workload instances (Pod "
                    f"selector {selector_text(selector)}). If you need to access the gateway "
                    "port through the gateway Service, it will not be available.",
                    code="IST0162",
                )
            listening = translated.get(number, number)
            if declared and listening not in declared:
                yield finding(
                    gateway,
                    path,
                    "The gateway refers to a port that is not exposed on the workload (pod "
                    f"selector {selector_text(selector)}; port {number})",
                    code="IST0104",
                )


def _container_ports(pods: Sequence[ConfigObject[Any]]) -> set[int]:
    return {
        port.container_port
        for pod in pods
        for container in pod.model.spec.containers
        for port in container.ports
    }


def _named_port(pods: Sequence[ConfigObject[Any]], name: str) -> int | None:
    for pod in pods:
        for container in pod.model.spec.containers:
            for port in container.ports:
                if port.name == name:
                    return int(port.container_port)
    return None
