"""Gateways and the workloads that run them: a selector that matches no workload (IST0101
selector), a credentialName with no Secret in the namespace of the gateway's workloads
(IST0101 credentialName), or a Secret that holds no usable certificate (IST0161). Istio's
gateway.IngressGatewayPortAnalyzer (selector part) and gateway.SecretAnalyzer."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from meshpilot.analysis.findings import Path, finding, quoted
from meshpilot.analysis.lookup import Workload, selector_matches, selector_text, workloads
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.istio.gateway import Gateway, ServerTLSSettings
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.core import Secret
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["check_gateway_workloads"]

# Key pairs a gateway credential may use (Istio's kubernetes secret controller).
CERT_PAIRS = (("tls.crt", "tls.key"), ("cert", "key"))
CA_KEYS = ("ca.crt", "cacert")
CA_SECRET_SUFFIX = "-cacert"
_MUTUAL = ("MUTUAL", "OPTIONAL_MUTUAL")


def check_gateway_workloads(push: PushContext) -> Iterator[Diagnostic]:
    found = workloads(push)
    for gateway in push.of_kind(Kind.GATEWAY):
        selector = gateway.model.spec.selector
        selected = [w for w in found if selector_matches(selector, w.labels)]
        if not selected:
            first = sorted(selector)[0] if selector else None
            path: Path = ("spec", "selector", first) if first else ("spec", "selector")
            yield finding(
                gateway,
                path,
                f"Referenced selector not found: {quoted(selector_text(selector))}",
                code="IST0101",
            )
            continue
        yield from _check_credentials(push, gateway, selected)


def _check_credentials(
    push: PushContext, gateway: ConfigObject[Gateway], selected: Sequence[Workload]
) -> Iterator[Diagnostic]:
    namespaces = sorted({w.namespace for w in selected})
    for index, server in enumerate(gateway.model.spec.servers):
        tls = server.tls
        if tls is None:
            continue
        names: list[tuple[Path, str]] = []
        if tls.credential_name:
            names.append((("credentialName",), tls.credential_name))
        names += [(("credentialNames", i), n) for i, n in enumerate(tls.credential_names)]
        for suffix, name in names:
            if "/" in name or ":" in name:
                continue  # a typed or namespaced reference; not a plain Secret name
            path: Path = ("spec", "servers", index, "tls", *suffix)
            for namespace in namespaces:
                yield from _check_secret(push, gateway, path, tls, namespace, name)


def _check_secret(
    push: PushContext,
    gateway: ConfigObject[Gateway],
    path: Path,
    tls: ServerTLSSettings,
    namespace: str,
    name: str,
) -> Iterator[Diagnostic]:
    secret = push.secret(namespace, name)
    if secret is None:
        yield finding(
            gateway,
            path,
            f"Referenced credentialName not found: {quoted(name)}",
            code="IST0101",
        )
        return
    problem = _credential_problem(push, secret, tls.mode)
    if problem:
        yield finding(
            gateway,
            path,
            f"The credential referenced by the Gateway {gateway.name} in namespace "
            f"{gateway.namespace} is invalid, which can cause the traffic not to work as "
            "expected.",
            code="IST0161",
        )


def _credential_problem(push: PushContext, secret: ConfigObject[Any], mode: str) -> str:
    model: Secret = secret.model
    keys = set(model.data) | set(model.string_data)
    if not any(cert in keys and key in keys for cert, key in CERT_PAIRS):
        return "has neither tls.crt and tls.key nor cert and key"
    if mode in _MUTUAL and not keys.intersection(CA_KEYS):
        ca_secret = push.secret(secret.namespace, secret.name + CA_SECRET_SUFFIX)
        if ca_secret is None:
            return (
                f"has no ca.crt or cacert for {mode} TLS, and there is no Secret "
                f"{secret.name}{CA_SECRET_SUFFIX}"
            )
    return ""
