"""AuthorizationPolicy and RequestAuthentication findings.

- A selector that matches no workload (Istio's IST0127, NoMatchingWorkloadsFound); in the
  root namespace the selector is matched against workloads of every namespace.
- A CUSTOM AuthorizationPolicy whose provider meshConfig.extensionProviders does not define
  as envoyExtAuthzHttp/envoyExtAuthzGrpc, or whose authorizer service no registry knows:
  requests its rules match are denied.
- A `jwksUri` whose host and port no Service or ServiceEntry defines: Envoy fetches the
  keys through `outbound|<port>||<host>`, so without that cluster every token of the issuer
  is rejected (401).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast
from urllib.parse import urlsplit

from meshpilot.analysis.findings import finding, quoted
from meshpilot.analysis.lookup import selector_matches, selector_text, workloads
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.istio.authorization_policy import AuthorizationPolicy
from meshpilot.config.istio.request_authentication import RequestAuthentication
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["check_security_policies"]


def check_security_policies(push: PushContext) -> Iterator[Diagnostic]:
    yield from _unmatched_selectors(push)
    for policy in cast(
        Sequence[ConfigObject[AuthorizationPolicy]], push.of_kind(Kind.AUTHORIZATION_POLICY)
    ):
        yield from _unusable_provider(push, policy)
    for obj in cast(
        Sequence[ConfigObject[RequestAuthentication]], push.of_kind(Kind.REQUEST_AUTHENTICATION)
    ):
        yield from _unknown_jwks_hosts(push, obj)


def _unmatched_selectors(push: PushContext) -> Iterator[Diagnostic]:
    found = workloads(push)
    root = push.mesh.root_namespace
    for kind in (Kind.AUTHORIZATION_POLICY, Kind.REQUEST_AUTHENTICATION):
        for obj in cast(Sequence[ConfigObject[Any]], push.of_kind(kind)):
            selector = obj.model.spec.selector
            if selector is None or not selector.match_labels:
                continue
            if any(
                (obj.namespace in (root, w.namespace))
                and selector_matches(selector.match_labels, w.labels)
                for w in found
            ):
                continue
            yield finding(
                obj,
                ("spec", "selector", "matchLabels"),
                "No matching workloads for this resource with the following labels: "
                f"{selector_text(selector.match_labels)}",
                code="IST0127",
            )


def _unknown_jwks_hosts(
    push: PushContext, obj: ConfigObject[RequestAuthentication]
) -> Iterator[Diagnostic]:
    for index, rule in enumerate(obj.model.spec.jwt_rules):
        if not rule.jwks_uri or rule.jwks:
            continue
        parts = urlsplit(rule.jwks_uri)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        services = push.registry.services_for_host(host)
        if any(svc.port(port) is not None for svc in services):
            continue
        yield finding(
            obj,
            ("spec", "jwtRules", index, "jwksUri"),
            f"no Service or ServiceEntry defines host {quoted(host)} port {port}: Envoy cannot "
            f"fetch the keys of issuer {quoted(rule.issuer)} and rejects its tokens (401); "
            "add a ServiceEntry for the JWKS server or use inline jwks",
            code="MP0008",
        )


def _unusable_provider(
    push: PushContext, obj: ConfigObject[AuthorizationPolicy]
) -> Iterator[Diagnostic]:
    spec = obj.model.spec
    if spec.action != "CUSTOM" or spec.provider is None or not spec.provider.name:
        return
    name = spec.provider.name
    found = [p for p in push.mesh.extension_providers if p.name == name]
    config = found[0].envoy_ext_authz_http or found[0].envoy_ext_authz_grpc if found else None
    if config is None:
        known = sorted(
            p.name
            for p in push.mesh.extension_providers
            if p.envoy_ext_authz_http or p.envoy_ext_authz_grpc
        )
        problem = (
            f"extension provider {quoted(name)} is not an envoyExtAuthzHttp or "
            f"envoyExtAuthzGrpc provider of meshConfig.extensionProviders "
            f"(available: {', '.join(known) or 'none'})"
        )
    else:
        host = config.service.rpartition("/")[2]
        if push.registry.services_for_host(host):
            return
        problem = (
            f"no Service or ServiceEntry defines {quoted(host)}, the authorizer of {quoted(name)}"
        )
    yield finding(
        obj,
        ("spec", "provider", "name"),
        f"{problem}: requests matching this CUSTOM policy are denied",
        code="MP0012",
    )
