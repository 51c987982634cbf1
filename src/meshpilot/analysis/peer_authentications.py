"""PeerAuthentication findings: policies Istio ignores, and DestinationRules that send
plaintext where the destination only accepts mTLS.

- Several selector-less policies in one namespace (or several selecting the same labels):
  only the oldest applies (Istio's ComposePeerAuthentication); the others are flagged.
- A selecting policy in the root namespace applies to nothing.
- A DestinationRule whose traffic policy sets `tls.mode: DISABLE` for a service whose
  namespace (or the mesh) is STRICT: every request fails (Istio's former IST0113,
  MTLSPolicyConflict).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast

from meshpilot.analysis.findings import finding, quoted
from meshpilot.analysis.lookup import services_intersecting
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.hosts import resolve_host
from meshpilot.config.istio.peer_authentication import MtlsMode, PeerAuthentication
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.indexes.authn import PeerAuthnIndex, peer_authn
from meshpilot.model.push_context import PushContext

__all__ = ["check_peer_authentications"]

_Policy = ConfigObject[PeerAuthentication]


def check_peer_authentications(push: PushContext) -> Iterator[Diagnostic]:
    index = peer_authn(push)
    for policies in index.scoped.values():
        yield from _shadowed(policies[1:], policies[0], "namespace-wide")
    by_selector: dict[tuple[str, frozenset[tuple[str, str]]], list[_Policy]] = {}
    for policies in index.selecting.values():
        for policy in policies:
            selector = policy.model.spec.selector
            labels = frozenset(selector.match_labels.items()) if selector else frozenset()
            by_selector.setdefault((policy.namespace, labels), []).append(policy)
    for same in by_selector.values():
        yield from _shadowed(same[1:], same[0], "for the same workloads")
    for policy in cast(Sequence[_Policy], push.of_kind(Kind.PEER_AUTHENTICATION)):
        if policy.namespace == index.root_namespace and policy.model.spec.has_selector:
            yield finding(
                policy,
                ("spec", "selector"),
                f"a PeerAuthentication with a selector in the root namespace "
                f"{index.root_namespace} applies to no workload; remove the selector for a "
                "mesh-wide policy, or move it to the workloads' namespace",
                code="MP0006",
            )
    yield from _plaintext_to_strict(push)


def _shadowed(ignored: Sequence[_Policy], winner: _Policy, scope: str) -> Iterator[Diagnostic]:
    for policy in ignored:
        yield finding(
            policy,
            ("spec",),
            f"ignored: PeerAuthentication {winner.namespace}/{winner.name} is older and also "
            f"{scope}; only the oldest applies",
            code="MP0005",
        )


def _plaintext_to_strict(push: PushContext) -> Iterator[Diagnostic]:
    index = peer_authn(push)
    for dr in cast(Sequence[ConfigObject[Any]], push.of_kind(Kind.DESTINATION_RULE)):
        spec = dr.model.spec
        tls = spec.traffic_policy.tls if spec.traffic_policy else None
        if tls is None or tls.mode != "DISABLE":
            continue
        host = resolve_host(spec.host, dr.namespace, push.domain_suffix)
        for svc in services_intersecting(push, host):
            if svc.mesh_external:
                continue
            policy = _strict_policy(index, svc.namespace)
            if policy is not None:
                yield finding(
                    dr,
                    ("spec", "trafficPolicy", "tls", "mode"),
                    "A DestinationRule and Policy are in conflict with regards to mTLS for host "
                    f"{svc.hostname}. The DestinationRule {quoted(f'{dr.namespace}/{dr.name}')} "
                    "specifies that mTLS must be false but the Policy object "
                    f"{quoted(f'{policy.namespace}/{policy.name}')} specifies STRICT.",
                    code="IST0113",
                )
                break


def _strict_policy(index: PeerAuthnIndex, namespace: str) -> _Policy | None:
    """The selector-less PeerAuthentication that makes a service's namespace STRICT (its
    namespace's own, else the mesh-wide one), None when the namespace is not STRICT."""
    if index.service_mode(namespace) is not MtlsMode.STRICT:
        return None
    for scope in (namespace, index.root_namespace):
        policies = index.scoped.get(scope, ())
        if policies and not policies[0].model.spec.is_unset:
            return policies[0]
    return None
