"""From a generated resource's provenance (`istio.config` metadata) to the object, its
file and line, and the field inside it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.explain.result import ObjectRef

__all__ = ["ObjectIndex"]

_KEBAB = {
    "virtual-service": Kind.VIRTUAL_SERVICE,
    "destination-rule": Kind.DESTINATION_RULE,
    "service-entry": Kind.SERVICE_ENTRY,
    "gateway": Kind.GATEWAY,
    "sidecar": Kind.SIDECAR,
    "authorization-policy": Kind.AUTHORIZATION_POLICY,
    "peer-authentication": Kind.PEER_AUTHENTICATION,
    "request-authentication": Kind.REQUEST_AUTHENTICATION,
    "envoy-filter": Kind.ENVOY_FILTER,
}


class _Named(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...


class ObjectIndex:
    """The input objects by key; turns keys and provenance paths into `ObjectRef`s."""

    def __init__(self, by_key: Mapping[ConfigKey, ConfigObject[Any]]) -> None:
        self._by_key = by_key

    def get(self, kind: Kind, namespace: str, name: str) -> ConfigObject[Any] | None:
        return self._by_key.get(ConfigKey(kind, namespace, name))

    def ref(
        self, kind: Kind, namespace: str, name: str, path: tuple[str | int, ...] = ()
    ) -> ObjectRef:
        obj = self.get(kind, namespace, name)
        field = _field_text(path)
        if obj is None:
            return ObjectRef(str(kind), namespace, name, field=field)
        line = obj.origin.line_of(path) if path else obj.origin.line
        return ObjectRef(str(kind), namespace, name, obj.origin.file, line, field)

    def of(self, obj: ConfigObject[Any], path: tuple[str | int, ...] = ()) -> ObjectRef:
        return self.ref(obj.key.kind, obj.namespace, obj.name, path)

    def ref_pod(self, workload: _Named, path: tuple[str | int, ...] = ()) -> ObjectRef:
        name = workload.name.rsplit(".", 1)[0]
        return self.ref(Kind.POD, workload.namespace, name, path)

    def service_ref(self, service: tuple[str, str] | None) -> ObjectRef | None:
        """The Service (or ServiceEntry) behind a cluster's (hostname, namespace)."""
        if service is None:
            return None
        host, namespace = service
        short = host.split(".", 1)[0]
        if host.endswith(".svc.cluster.local") and self.get(Kind.SERVICE, namespace, short):
            return self.ref(Kind.SERVICE, namespace, short)
        for key, obj in self._by_key.items():
            if key.kind is Kind.SERVICE_ENTRY and namespace in ("", key.namespace):
                hosts = list(getattr(obj.model.spec, "hosts", []) or [])
                if host in hosts:
                    return self.of(obj, ("spec", "hosts", hosts.index(host)))
        return None

    def rule_ref(self, config: str, subset: str) -> ObjectRef | None:
        """The DestinationRule behind a cluster, at `spec.subsets[i]` for a subset's."""
        plain = self.from_path(config) if config else None
        obj = self.get(Kind(plain.kind), plain.namespace, plain.name) if plain else None
        if obj is None or not subset:
            return plain
        names = [s.name for s in getattr(obj.model.spec, "subsets", None) or []]
        path = ("spec", "subsets", names.index(subset)) if subset in names else ()
        return self.of(obj, path)

    def vhost_ref(self, vhost: str) -> ObjectRef | None:
        """The Service or ServiceEntry behind a virtual host named `host:port`."""
        host = vhost.rsplit(":", 1)[0]
        parts = host.split(".")
        namespace = parts[1] if host.endswith(".svc.cluster.local") and len(parts) > 2 else ""
        return self.service_ref((host, namespace))

    def from_path(self, config: str, path: tuple[str | int, ...] = ()) -> ObjectRef | None:
        """`/apis/<group>/<version>/namespaces/<ns>/<kebab-kind>/<name>` → its ref."""
        parts = config.strip("/").split("/")
        if len(parts) != 7 or parts[3] != "namespaces" or parts[5] not in _KEBAB:
            return None
        return self.ref(_KEBAB[parts[5]], parts[4], parts[6], path)


def _field_text(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out
