"""What the walk needs besides the source's config: the objects (for file and line), the
pods by address, name resolution, and the destination's own config (its inbound side)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from meshpilot.explain.result import ObjectRef
from meshpilot.explain.sources import ObjectIndex
from meshpilot.model.indexes.authn import EffectiveMtls
from meshpilot.xds.output import ProxyConfig

__all__ = ["Scene", "Workload"]


@dataclass(frozen=True, slots=True)
class Workload:
    name: str  # POD.NAMESPACE
    namespace: str
    ip: str
    service_account: str
    proxy_type: str  # sidecar or router; "" for a pod without a proxy
    config: ProxyConfig | None  # None: no proxy (not injected)
    annotations: Mapping[str, str] = field(default_factory=dict)
    # A gateway's service ports → the container ports its listeners bind.
    port_map: Mapping[int, int] = field(default_factory=dict)
    # A gateway's Gateway servers by service port (the objects behind its listeners).
    gateways: Mapping[int, tuple[ObjectRef, ...]] = field(default_factory=dict)
    mtls: EffectiveMtls | None = None  # the PeerAuthentication mode it accepts


@dataclass(frozen=True, slots=True)
class Scene:
    index: ObjectIndex
    pods_by_ip: Mapping[str, str]
    # (host, the caller's namespace) → the address DNS gives the app, or None.
    resolve: Callable[[str, str], str | None]
    # A pod's address → that workload (with its generated config), or None.
    workload: Callable[[str], Workload | None]
    trust_domain: str = "cluster.local"
