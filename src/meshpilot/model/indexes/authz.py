"""AuthorizationPolicy and RequestAuthentication by scope: the policies that apply to a
workload, grouped as translation needs them.

Istio's ListAuthorizationPolicies / GetJwtPoliciesForWorkload: policies of the root
namespace apply mesh-wide, policies of the workload's namespace apply to it, in both cases
when their `selector.matchLabels` is a subset of the workload's labels (no selector: every
workload). Policies with `targetRef(s)` attach to gateways and waypoints, not to sidecars.
Inside a scope policies keep Istio's order: oldest first, then by name.

The index is built once per push and its answers are memoised per (namespace, labels) in
`push.memo` (`workload_security(push, namespace, labels)`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from meshpilot.config.istio.authorization_policy import Action, AuthorizationPolicy
from meshpilot.config.istio.common import WorkloadSelector
from meshpilot.config.istio.request_authentication import RequestAuthentication
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["AuthzIndex", "WorkloadSecurity", "workload_security"]

_Authz = ConfigObject[AuthorizationPolicy]
_Authn = ConfigObject[RequestAuthentication]
_INDEX_KEY = "authz.index"
_MEMO_KEY = "authz.workload"


@dataclass(frozen=True, slots=True)
class WorkloadSecurity:
    """What applies to one workload, in Istio's order inside each group."""

    custom: tuple[_Authz, ...] = ()
    deny: tuple[_Authz, ...] = ()
    audit: tuple[_Authz, ...] = ()
    allow: tuple[_Authz, ...] = ()
    request_authn: tuple[_Authn, ...] = ()
    # Stand-ins of invalid policies with no last good version: each denies everything.
    invalid: tuple[_Authz, ...] = ()

    @property
    def empty(self) -> bool:
        groups = (self.custom, self.deny, self.audit, self.allow, self.request_authn)
        return not any(groups) and not self.invalid

    def dependencies(self) -> tuple[object, ...]:
        """The keys of every policy used: what a cache of the generated filters depends on."""
        groups = (self.invalid, self.custom, self.deny, self.audit, self.allow, self.request_authn)
        return tuple(obj.key for group in groups for obj in group)


def _age(obj: ConfigObject[Any]) -> tuple[str, str]:
    """Istio's sortConfigByCreationTime: oldest first, then by name."""
    return (obj.model.metadata.creation_timestamp or "", obj.name)


def _selects(selector: WorkloadSelector | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return True
    return all(labels.get(k) == v for k, v in selector.match_labels.items())


@dataclass(frozen=True, slots=True)
class AuthzIndex:
    root_namespace: str
    authz: Mapping[str, tuple[_Authz, ...]]  # by namespace, oldest first
    authn: Mapping[str, tuple[_Authn, ...]]

    @classmethod
    def build(
        cls, authz: Sequence[_Authz], authn: Sequence[_Authn], root_namespace: str
    ) -> AuthzIndex:
        by_ns: dict[str, list[_Authz]] = {}
        for policy in sorted(authz, key=_age):
            by_ns.setdefault(policy.namespace, []).append(policy)
        jwt_by_ns: dict[str, list[_Authn]] = {}
        for ra in sorted(authn, key=_age):
            jwt_by_ns.setdefault(ra.namespace, []).append(ra)
        return cls(
            root_namespace,
            {k: tuple(v) for k, v in by_ns.items()},
            {k: tuple(v) for k, v in jwt_by_ns.items()},
        )

    def _namespaces(self, namespace: str) -> tuple[str, ...]:
        if namespace == self.root_namespace:
            return (namespace,)
        return (self.root_namespace, namespace)

    def for_workload(self, namespace: str, labels: Mapping[str, str]) -> WorkloadSecurity:
        groups: dict[str, list[_Authz]] = {a.value: [] for a in Action}
        invalid: list[_Authz] = []
        for ns in self._namespaces(namespace):
            for policy in self.authz.get(ns, ()):
                spec = policy.model.spec
                if not spec.has_target_refs and _selects(spec.selector, labels):
                    found = invalid if policy.fail_closed else groups.setdefault(spec.action, [])
                    found.append(policy)
        jwt = [
            ra
            for ns in self._namespaces(namespace)
            for ra in self.authn.get(ns, ())
            if not ra.model.spec.has_target_refs and _selects(ra.model.spec.selector, labels)
        ]
        return WorkloadSecurity(
            custom=tuple(groups[Action.CUSTOM]),
            deny=tuple(groups[Action.DENY]),
            audit=tuple(groups[Action.AUDIT]),
            allow=tuple(groups[Action.ALLOW]),
            request_authn=tuple(jwt),
            invalid=tuple(invalid),
        )


def _index(push: PushContext) -> AuthzIndex:
    index = push.memo.get(_INDEX_KEY)
    if index is None:
        index = AuthzIndex.build(
            cast(Sequence[_Authz], push.of_kind(Kind.AUTHORIZATION_POLICY)),
            cast(Sequence[_Authn], push.of_kind(Kind.REQUEST_AUTHENTICATION)),
            push.mesh.root_namespace,
        )
        push.memo[_INDEX_KEY] = index
    return cast(AuthzIndex, index)


def workload_security(
    push: PushContext, namespace: str, labels: Mapping[str, str]
) -> WorkloadSecurity:
    """The policies applying to a workload; memoised per (namespace, labels) for the push."""
    memo = cast(
        dict[tuple[str, frozenset[tuple[str, str]]], WorkloadSecurity],
        push.memo.setdefault(_MEMO_KEY, {}),
    )
    key = (namespace, frozenset(labels.items()))
    found = memo.get(key)
    if found is None:
        found = _index(push).for_workload(namespace, labels)
        memo[key] = found
    return found
