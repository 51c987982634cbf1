"""`targetRef` / `targetRefs` as Istio's CRD schemas check them (PolicyTargetReference): a
group and kind of Kubernetes' shapes, a name, no namespace (cross-namespace references are not
supported), one of the kinds the CRD allows, and never both fields nor one with a selector."""

from __future__ import annotations

import re
from collections.abc import Sequence

from meshpilot.config.istio.authorization_policy import PolicyTargetReference
from meshpilot.config.validation.common import Path, Problems, quoted

__all__ = ["GATEWAY_OR_SERVICE", "SERVICE_ENTRY_TOO", "check_target_refs"]

_GATEWAY_API = "gateway.networking.k8s.io"
# (group, kind) pairs; "core" and "" both name the core group.
GATEWAY_OR_SERVICE = frozenset({("", "Service"), ("core", "Service"), (_GATEWAY_API, "Gateway")})
SERVICE_ENTRY_TOO = GATEWAY_OR_SERVICE | {("networking.istio.io", "ServiceEntry")}
_GROUP = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_KIND = re.compile(r"[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?")


def check_target_refs(
    p: Problems,
    target_ref: PolicyTargetReference | None,
    target_refs: Sequence[PolicyTargetReference] | None,
    kinds: frozenset[tuple[str, str]],
) -> None:
    """Each reference of `spec.targetRef` and `spec.targetRefs`; both set is an error."""
    if target_ref is not None and target_refs:
        p.error(("spec", "targetRef"), "only one of targetRef or targetRefs can be set")
    if target_ref is not None:
        _check_ref(p, ("spec", "targetRef"), target_ref, kinds)
    for index, ref in enumerate(target_refs or ()):
        _check_ref(p, ("spec", "targetRefs", index), ref, kinds)


def _check_ref(
    p: Problems, path: Path, ref: PolicyTargetReference, kinds: frozenset[tuple[str, str]]
) -> None:
    group_ok = not ref.group or (len(ref.group) <= 253 and bool(_GROUP.fullmatch(ref.group)))
    if not group_ok:
        p.error((*path, "group"), f"invalid group {quoted(ref.group)}: not a DNS subdomain")
    if not ref.kind:
        p.error((*path, "kind"), "kind is required")
    elif len(ref.kind) > 63 or not _KIND.fullmatch(ref.kind):
        p.error((*path, "kind"), f"invalid kind {quoted(ref.kind)}")
    elif group_ok and (ref.group, ref.kind) not in kinds:
        p.error(path, f"unsupported target kind {_kind(ref)}; supported: {_supported(kinds)}")
    if not ref.name:
        p.error((*path, "name"), "name is required")
    elif len(ref.name) > 253:
        p.error((*path, "name"), "name must be at most 253 characters")
    if ref.namespace:
        p.error(
            (*path, "namespace"),
            "cross namespace referencing is not currently supported (leave namespace empty)",
        )


def _kind(ref: PolicyTargetReference) -> str:
    return f"{ref.group or 'core'}/{ref.kind}"


def _supported(kinds: frozenset[tuple[str, str]]) -> str:
    return ", ".join(sorted({f"{group or 'core'}/{kind}" for group, kind in kinds}))
