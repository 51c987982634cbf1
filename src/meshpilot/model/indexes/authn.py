"""PeerAuthentication by scope: the effective mTLS mode of a workload, per port.

Istio's ComposePeerAuthentication: the oldest selector-less policy of the root namespace is
the mesh policy, the oldest selector-less policy of the workload's namespace the namespace
policy, and the oldest policy whose selector matches the workload (outside the root
namespace) the workload policy. They apply in that order; UNSET inherits from the level
above, and the mesh default is PERMISSIVE. Port-level modes come from the workload policy
only (UNSET there inherits the workload's mode).

The index is built once per push and kept in `push.memo` (`peer_authn(push)`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from meshpilot.config.istio.peer_authentication import MtlsMode, PeerAuthentication
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["EffectiveMtls", "PeerAuthnIndex", "peer_authn"]

_Policy = ConfigObject[PeerAuthentication]
_MEMO_KEY = "authn.peer"


@dataclass(frozen=True, slots=True)
class EffectiveMtls:
    """The mode a workload accepts: DISABLE, PERMISSIVE or STRICT (never UNSET)."""

    mode: MtlsMode = MtlsMode.PERMISSIVE
    per_port: Mapping[int, MtlsMode] = field(default_factory=dict)
    # The policies that decided it (mesh, namespace, workload), for provenance.
    sources: tuple[_Policy, ...] = ()

    def for_port(self, port: int) -> MtlsMode:
        return self.per_port.get(port, self.mode)


def _age(policy: _Policy) -> tuple[str, str, str]:
    """Istio's sortConfigByCreationTime: oldest first, then by name and namespace."""
    return (policy.model.metadata.creation_timestamp or "", policy.name, policy.namespace)


def _mode(value: str) -> MtlsMode:
    return MtlsMode(value) if value in MtlsMode.__members__ else MtlsMode.UNSET


@dataclass(frozen=True, slots=True)
class PeerAuthnIndex:
    root_namespace: str
    # Oldest first; selector-less policies by namespace, selecting ones by namespace.
    scoped: Mapping[str, tuple[_Policy, ...]]
    selecting: Mapping[str, tuple[_Policy, ...]]
    _memo: dict[tuple[str, frozenset[tuple[str, str]]], EffectiveMtls] = field(default_factory=dict)

    @classmethod
    def build(cls, policies: Sequence[_Policy], root_namespace: str) -> PeerAuthnIndex:
        scoped: dict[str, list[_Policy]] = {}
        selecting: dict[str, list[_Policy]] = {}
        # An invalid policy's STRICT stand-in (config/fail_closed.py) wins its level.
        for policy in sorted(policies, key=lambda p: (not p.fail_closed, *_age(p))):
            if policy.model.spec.has_selector:
                if policy.namespace != root_namespace:  # Istio ignores these
                    selecting.setdefault(policy.namespace, []).append(policy)
            else:
                scoped.setdefault(policy.namespace, []).append(policy)
        return cls(
            root_namespace,
            {k: tuple(v) for k, v in scoped.items()},
            {k: tuple(v) for k, v in selecting.items()},
        )

    @property
    def empty(self) -> bool:
        return not self.scoped and not self.selecting

    def _first_scoped(self, namespace: str) -> _Policy | None:
        found = self.scoped.get(namespace)
        return found[0] if found else None

    def workload_policy(self, namespace: str, labels: Mapping[str, str]) -> _Policy | None:
        for policy in self.selecting.get(namespace, ()):
            selector = policy.model.spec.selector
            assert selector is not None
            if all(labels.get(k) == v for k, v in selector.match_labels.items()):
                return policy
        return None

    def mesh_mode(self) -> MtlsMode:
        policy = self._first_scoped(self.root_namespace)
        if policy is None or policy.model.spec.is_unset:
            return MtlsMode.PERMISSIVE
        return _mode(cast(Any, policy.model.spec.mtls).mode)

    def namespace_mode(self, namespace: str) -> MtlsMode:
        """The mode of a namespace's selector-less policy, UNSET when it has none (or it
        inherits)."""
        if namespace == self.root_namespace:
            return MtlsMode.UNSET
        policy = self._first_scoped(namespace)
        if policy is None or policy.model.spec.is_unset:
            return MtlsMode.UNSET
        return _mode(cast(Any, policy.model.spec.mtls).mode)

    def service_mode(self, namespace: str) -> MtlsMode:
        """What a client assumes about a service's workloads (Istio's
        BestEffortInferServiceMTLSMode): the namespace's mode, else the mesh's."""
        mode = self.namespace_mode(namespace)
        return mode if mode is not MtlsMode.UNSET else self.mesh_mode()

    def for_workload(self, namespace: str, labels: Mapping[str, str]) -> EffectiveMtls:
        key = (namespace, frozenset(labels.items()) if namespace in self.selecting else frozenset())
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._compose(namespace, labels)
        return found

    def _compose(self, namespace: str, labels: Mapping[str, str]) -> EffectiveMtls:
        mode = self.service_mode(namespace)
        sources = [
            p
            for p in (
                self._first_scoped(self.root_namespace),
                self._first_scoped(namespace) if namespace != self.root_namespace else None,
            )
            if p is not None
        ]
        workload = self.workload_policy(namespace, labels)
        if workload is None:
            return EffectiveMtls(mode, {}, tuple(sources))
        spec = workload.model.spec
        if not spec.is_unset:
            mode = _mode(cast(Any, spec.mtls).mode)
        per_port = {
            port: mode if mtls.is_unset else _mode(mtls.mode)
            for port, mtls in (spec.port_level_mtls or {}).items()
        }
        return EffectiveMtls(mode, per_port, (*sources, workload))


def peer_authn(push: PushContext) -> PeerAuthnIndex:
    """The push's index, built on first use and kept in the push's memo."""
    index = push.memo.get(_MEMO_KEY)
    if index is None:
        policies = cast(Sequence[_Policy], push.of_kind(Kind.PEER_AUTHENTICATION))
        index = push.memo[_MEMO_KEY] = PeerAuthnIndex.build(policies, push.mesh.root_namespace)
    assert isinstance(index, PeerAuthnIndex)
    return index
