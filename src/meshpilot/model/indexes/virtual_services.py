"""VirtualServices by gateway and namespace, with hosts and gateway names resolved."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from meshpilot.config.hosts import host_matches, resolve_host
from meshpilot.config.istio.virtual_service import VirtualService
from meshpilot.config.mesh import MeshConfig
from meshpilot.config.objects import ConfigObject
from meshpilot.model.visibility import visible_to

__all__ = ["MESH_GATEWAY", "BoundVirtualService", "VirtualServiceIndex", "resolve_gateway_name"]

MESH_GATEWAY = "mesh"


def resolve_gateway_name(name: str, namespace: str) -> str:
    """`my-gw` in namespace `ns` -> `ns/my-gw`; `mesh` stays `mesh`."""
    if name == MESH_GATEWAY or "/" in name:
        return name
    return f"{namespace}/{name.split('.')[0] if name.count('.') >= 1 else name}"


@dataclass(frozen=True, slots=True)
class BoundVirtualService:
    obj: ConfigObject[VirtualService]
    hosts: tuple[str, ...]  # fully qualified
    gateways: frozenset[str]  # "mesh" or "namespace/name"
    # The object's, as plain attributes: route generation reads them ~10 times per
    # VirtualService, and each went through two properties (here and ConfigObject's).
    namespace: str = field(init=False, compare=False)
    name: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "namespace", self.obj.key.namespace)
        object.__setattr__(self, "name", self.obj.key.name)

    def matches_host(self, hostname: str) -> bool:
        return any(host_matches(h, hostname) or host_matches(hostname, h) for h in self.hosts)


@dataclass(frozen=True, slots=True)
class VirtualServiceIndex:
    all: tuple[BoundVirtualService, ...]  # ordered: creation time, namespace, name
    delegates: dict[tuple[str, str], BoundVirtualService]
    default_export_to: tuple[str, ...]

    @classmethod
    def build(
        cls, objects: Sequence[ConfigObject[VirtualService]], mesh: MeshConfig, domain_suffix: str
    ) -> VirtualServiceIndex:
        bound, delegates = [], {}
        for obj in sorted(
            objects, key=lambda o: (o.model.metadata.creation_timestamp or "", o.namespace, o.name)
        ):
            spec = obj.model.spec
            hosts = tuple(resolve_host(h, obj.namespace, domain_suffix) for h in spec.hosts)
            gateways = frozenset(
                resolve_gateway_name(g, obj.namespace) for g in spec.gateways
            ) or frozenset({MESH_GATEWAY})
            vs = BoundVirtualService(obj, hosts, gateways)
            if not hosts:
                delegates[(obj.namespace, obj.name)] = vs
            else:
                bound.append(vs)
        return cls(tuple(bound), delegates, tuple(mesh.default_virtual_service_export_to))

    def for_gateway(self, gateway: str, proxy_namespace: str) -> list[BoundVirtualService]:
        """VirtualServices bound to `gateway` and exported to `proxy_namespace`; those in the
        proxy's own namespace first (Istio's precedence), then in creation order."""
        visible = [
            vs for vs in self.all if gateway in vs.gateways and self._exported(vs, proxy_namespace)
        ]
        return sorted(visible, key=lambda vs: vs.namespace != proxy_namespace)

    def delegate(self, name: str, namespace: str) -> BoundVirtualService | None:
        return self.delegates.get((namespace, name))

    def _exported(self, vs: BoundVirtualService, proxy_namespace: str) -> bool:
        return visible_to(
            vs.obj.model.spec.export_to, vs.namespace, proxy_namespace, self.default_export_to
        )
