"""The model class of every kind meshpilot reads."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from meshpilot.config.base import TopLevel
from meshpilot.config.istio.authorization_policy import AuthorizationPolicy
from meshpilot.config.istio.destination_rule import DestinationRule
from meshpilot.config.istio.envoy_filter import EnvoyFilter
from meshpilot.config.istio.gateway import Gateway
from meshpilot.config.istio.peer_authentication import PeerAuthentication
from meshpilot.config.istio.proxy_config_kind import ProxyConfigResource
from meshpilot.config.istio.request_authentication import RequestAuthentication
from meshpilot.config.istio.service_entry import ServiceEntry, WorkloadEntry
from meshpilot.config.istio.sidecar import Sidecar
from meshpilot.config.istio.telemetry import Telemetry
from meshpilot.config.istio.virtual_service import VirtualService
from meshpilot.config.istio.wasm_plugin import WasmPlugin
from meshpilot.config.istio.workload_group import WorkloadGroup
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.core import ConfigMap, Namespace, Secret, ServiceAccount
from meshpilot.config.kube.deployment import Deployment
from meshpilot.config.kube.pod import Pod
from meshpilot.config.kube.service import Endpoints, EndpointSlice, Service
from meshpilot.config.kube.webhook_configuration import MutatingWebhookConfiguration

__all__ = ["MODEL_BY_KIND", "register_model"]


class ModelTable(Mapping[Kind, type[TopLevel]]):
    """Kinds to model classes. Some load their module on first use: the install package
    costs every command's start-up, and only installation commands meet an IstioOperator."""

    def __init__(
        self, models: dict[Kind, type[TopLevel]], lazy: dict[Kind, tuple[str, str]]
    ) -> None:
        self._models = models
        self._lazy = lazy

    def __getitem__(self, kind: Kind) -> type[TopLevel]:
        if kind not in self._models and kind in self._lazy:
            module, name = self._lazy[kind]
            self._models[kind] = getattr(importlib.import_module(module), name)
        return self._models[kind]

    def __iter__(self) -> Iterator[Kind]:
        yield from self._models
        yield from (kind for kind in self._lazy if kind not in self._models)

    def __len__(self) -> int:
        return len(self._models.keys() | self._lazy.keys())

    def register(self, kind: Kind, model: type[TopLevel]) -> None:
        self._models[kind] = model


_EAGER: dict[Kind, type[TopLevel]] = {
    Kind.NAMESPACE: Namespace,
    Kind.SERVICE: Service,
    Kind.ENDPOINTS: Endpoints,
    Kind.ENDPOINT_SLICE: EndpointSlice,
    Kind.POD: Pod,
    Kind.SECRET: Secret,
    Kind.SERVICE_ACCOUNT: ServiceAccount,
    Kind.CONFIG_MAP: ConfigMap,
    Kind.DEPLOYMENT: Deployment,
    Kind.GATEWAY: Gateway,
    Kind.VIRTUAL_SERVICE: VirtualService,
    Kind.DESTINATION_RULE: DestinationRule,
    Kind.SERVICE_ENTRY: ServiceEntry,
    Kind.WORKLOAD_ENTRY: WorkloadEntry,
    Kind.SIDECAR: Sidecar,
    Kind.AUTHORIZATION_POLICY: AuthorizationPolicy,
    Kind.REQUEST_AUTHENTICATION: RequestAuthentication,
    Kind.PEER_AUTHENTICATION: PeerAuthentication,
    Kind.ENVOY_FILTER: EnvoyFilter,
    Kind.TELEMETRY: Telemetry,
    Kind.WASM_PLUGIN: WasmPlugin,
    Kind.PROXY_CONFIG: ProxyConfigResource,
    Kind.WORKLOAD_GROUP: WorkloadGroup,
    Kind.MUTATING_WEBHOOK_CONFIGURATION: MutatingWebhookConfiguration,
}
MODEL_BY_KIND = ModelTable(
    _EAGER, {Kind.ISTIO_OPERATOR: ("meshpilot.install.spec", "IstioOperator")}
)


def register_model(kind: Kind, model: type[TopLevel]) -> None:
    """Add a kind whose model lives outside the mesh packages (gitops registers Application
    and AppProject this way, since mesh packages never import gitops)."""
    MODEL_BY_KIND.register(kind, model)
