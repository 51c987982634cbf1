"""The object kinds meshpilot reads, with the API groups and versions accepted for each."""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "CLUSTER_SCOPED",
    "ISTIO_API_GROUPS",
    "NOT_APPLIED_KINDS",
    "Kind",
    "accepted_api_versions",
    "api_group",
]


class Kind(StrEnum):
    NAMESPACE = "Namespace"
    SERVICE = "Service"
    ENDPOINTS = "Endpoints"
    ENDPOINT_SLICE = "EndpointSlice"
    POD = "Pod"
    SECRET = "Secret"
    SERVICE_ACCOUNT = "ServiceAccount"
    CONFIG_MAP = "ConfigMap"
    DEPLOYMENT = "Deployment"
    GATEWAY = "Gateway"
    VIRTUAL_SERVICE = "VirtualService"
    DESTINATION_RULE = "DestinationRule"
    SERVICE_ENTRY = "ServiceEntry"
    WORKLOAD_ENTRY = "WorkloadEntry"
    SIDECAR = "Sidecar"
    PEER_AUTHENTICATION = "PeerAuthentication"
    REQUEST_AUTHENTICATION = "RequestAuthentication"
    AUTHORIZATION_POLICY = "AuthorizationPolicy"
    ENVOY_FILTER = "EnvoyFilter"
    TELEMETRY = "Telemetry"
    WASM_PLUGIN = "WasmPlugin"
    PROXY_CONFIG = "ProxyConfig"
    WORKLOAD_GROUP = "WorkloadGroup"
    MESH_CONFIG = "MeshConfig"
    # Argo CD kinds: names only; their models live in meshpilot.gitops (registered by the CLI).
    APPLICATION = "Application"
    APP_PROJECT = "AppProject"
    ISTIO_OPERATOR = "IstioOperator"
    MUTATING_WEBHOOK_CONFIGURATION = "MutatingWebhookConfiguration"


_NETWORKING = (
    "networking.istio.io/v1alpha3",
    "networking.istio.io/v1beta1",
    "networking.istio.io/v1",
)

_SECURITY = ("security.istio.io/v1beta1", "security.istio.io/v1")

_API_VERSIONS: dict[Kind, tuple[str, ...]] = {
    Kind.NAMESPACE: ("v1",),
    Kind.SERVICE: ("v1",),
    Kind.ENDPOINTS: ("v1",),
    Kind.ENDPOINT_SLICE: ("discovery.k8s.io/v1", "discovery.k8s.io/v1beta1"),
    Kind.POD: ("v1",),
    Kind.SECRET: ("v1",),
    Kind.SERVICE_ACCOUNT: ("v1",),
    Kind.CONFIG_MAP: ("v1",),
    Kind.DEPLOYMENT: ("apps/v1",),
    Kind.GATEWAY: _NETWORKING,
    Kind.VIRTUAL_SERVICE: _NETWORKING,
    Kind.DESTINATION_RULE: _NETWORKING,
    Kind.SERVICE_ENTRY: _NETWORKING,
    Kind.WORKLOAD_ENTRY: _NETWORKING,
    Kind.SIDECAR: _NETWORKING,
    Kind.PEER_AUTHENTICATION: _SECURITY,
    Kind.REQUEST_AUTHENTICATION: _SECURITY,
    Kind.AUTHORIZATION_POLICY: _SECURITY,
    Kind.ENVOY_FILTER: ("networking.istio.io/v1alpha3",),
    Kind.TELEMETRY: ("telemetry.istio.io/v1alpha1", "telemetry.istio.io/v1"),
    Kind.WASM_PLUGIN: ("extensions.istio.io/v1alpha1",),
    Kind.PROXY_CONFIG: ("networking.istio.io/v1beta1",),
    Kind.WORKLOAD_GROUP: _NETWORKING,
    # Not a Kubernetes kind: meshpilot's name for a bare meshconfig.yaml document.
    Kind.MESH_CONFIG: ("meshpilot.io/v1alpha1", "install.istio.io/v1alpha1"),
    Kind.APPLICATION: ("argoproj.io/v1alpha1",),
    Kind.APP_PROJECT: ("argoproj.io/v1alpha1",),
    Kind.ISTIO_OPERATOR: ("install.istio.io/v1alpha1",),
    Kind.MUTATING_WEBHOOK_CONFIGURATION: ("admissionregistration.k8s.io/v1",),
}

# Istio's API groups: a kind of these groups that meshpilot does not know is an error, not a
# warning (a typo there would otherwise silently drop mesh configuration).
ISTIO_API_GROUPS = frozenset(
    {"networking.istio.io", "security.istio.io", "telemetry.istio.io", "extensions.istio.io"}
)
# Kinds validated as istiod does but not applied yet: each object of them gets a warning.
NOT_APPLIED_KINDS: frozenset[Kind] = frozenset({Kind.PROXY_CONFIG, Kind.WORKLOAD_GROUP})

CLUSTER_SCOPED: frozenset[Kind] = frozenset(
    {Kind.NAMESPACE, Kind.MESH_CONFIG, Kind.MUTATING_WEBHOOK_CONFIGURATION}
)
# Kinds whose changes can be served by EDS alone (Istio: endpoint events, not config events).
ENDPOINT_KINDS: frozenset[Kind] = frozenset(
    {Kind.POD, Kind.ENDPOINTS, Kind.ENDPOINT_SLICE, Kind.WORKLOAD_ENTRY}
)


def accepted_api_versions(kind: Kind) -> tuple[str, ...]:
    return _API_VERSIONS[kind]


def api_group(api_version: object) -> str:
    """The group of an apiVersion ("" for the core group or a value that is not a string)."""
    if not isinstance(api_version, str):
        return ""
    group, slash, _ = api_version.rpartition("/")
    return group if slash else ""
