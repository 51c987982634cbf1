"""Where each kind lives on the API server: its group, the version read and written (the
one Istio, Kubernetes and Argo CD serve as the storage version today) and its resource
paths, as kubectl builds them."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from meshpilot.config.kinds import CLUSTER_SCOPED, Kind
from meshpilot.store.resources import resource_type

__all__ = ["API_RESOURCES", "ApiResource"]

_VERSIONS: dict[Kind, str] = {
    Kind.NAMESPACE: "v1",
    Kind.SERVICE: "v1",
    Kind.ENDPOINTS: "v1",
    Kind.ENDPOINT_SLICE: "discovery.k8s.io/v1",
    Kind.POD: "v1",
    Kind.SECRET: "v1",
    Kind.SERVICE_ACCOUNT: "v1",
    Kind.CONFIG_MAP: "v1",
    Kind.GATEWAY: "networking.istio.io/v1",
    Kind.VIRTUAL_SERVICE: "networking.istio.io/v1",
    Kind.DESTINATION_RULE: "networking.istio.io/v1",
    Kind.SERVICE_ENTRY: "networking.istio.io/v1",
    Kind.WORKLOAD_ENTRY: "networking.istio.io/v1",
    Kind.SIDECAR: "networking.istio.io/v1",
    Kind.WORKLOAD_GROUP: "networking.istio.io/v1",
    Kind.ENVOY_FILTER: "networking.istio.io/v1alpha3",
    Kind.PROXY_CONFIG: "networking.istio.io/v1beta1",
    Kind.PEER_AUTHENTICATION: "security.istio.io/v1",
    Kind.REQUEST_AUTHENTICATION: "security.istio.io/v1",
    Kind.AUTHORIZATION_POLICY: "security.istio.io/v1",
    Kind.TELEMETRY: "telemetry.istio.io/v1",
    Kind.WASM_PLUGIN: "extensions.istio.io/v1alpha1",
    Kind.APPLICATION: "argoproj.io/v1alpha1",
    Kind.APP_PROJECT: "argoproj.io/v1alpha1",
}


@dataclass(frozen=True, slots=True)
class ApiResource:
    kind: Kind
    api_version: str  # "v1", "networking.istio.io/v1"
    plural: str

    @property
    def namespaced(self) -> bool:
        return self.kind not in CLUSTER_SCOPED

    def collection(self, namespace: str = "") -> str:
        """`/apis/networking.istio.io/v1/virtualservices` (every namespace) or, given a
        namespace, `/apis/.../namespaces/NS/virtualservices`."""
        root = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        where = f"/namespaces/{quote(namespace, safe='')}" if namespace and self.namespaced else ""
        return f"{root}{where}/{self.plural}"

    def item(self, namespace: str, name: str) -> str:
        return f"{self.collection(namespace)}/{quote(name, safe='')}"


API_RESOURCES: dict[Kind, ApiResource] = {
    kind: ApiResource(kind, version, resource_type(kind).plural)
    for kind, version in _VERSIONS.items()
}
