"""The injector's `values` (Istio's Helm values that its templates read), typed.

Only the values the built-in templates read are typed; Istio's other values are kept
(extra="allow") so that a `values` document copied from a cluster loads as it is.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from meshpilot import __version__
from meshpilot.config.base import ApiModel

__all__ = ["GlobalValues", "InjectorValues", "ProxyInitValues", "ProxyValues", "WebhookValues"]

_OPEN = ConfigDict(**{**ApiModel.model_config, "extra": "allow"})


def _resources(cpu: str, memory: str) -> dict[str, Any]:
    return {
        "limits": {"cpu": "2000m", "memory": "1024Mi"},
        "requests": {"cpu": cpu, "memory": memory},
    }


class ProxyValues(ApiModel):
    model_config = _OPEN

    image: str = "proxyv2"
    include_ip_ranges: str = Field(default="*", alias="includeIPRanges")
    exclude_ip_ranges: str = Field(default="", alias="excludeIPRanges")
    include_inbound_ports: str = "*"
    exclude_inbound_ports: str = ""
    include_outbound_ports: str = ""
    exclude_outbound_ports: str = ""
    status_port: int = 15020
    log_level: str = "warning"
    component_log_level: str = "misc:error"
    hold_application_until_proxy_starts: bool = False
    lifecycle: dict[str, Any] = Field(default_factory=dict)
    resources: dict[str, Any] = Field(default_factory=lambda: _resources("100m", "128Mi"))
    auto_inject: str = "enabled"
    cluster_domain: str = "cluster.local"
    readiness_initial_delay_seconds: int = 1
    readiness_period_seconds: int = 2
    readiness_failure_threshold: int = 30
    privileged: bool = False


class ProxyInitValues(ApiModel):
    model_config = _OPEN

    image: str = "proxyv2"
    resources: dict[str, Any] = Field(default_factory=lambda: _resources("10m", "10Mi"))


class Logging(ApiModel):
    model_config = _OPEN

    level: str = "default:info"


class MultiCluster(ApiModel):
    model_config = _OPEN

    cluster_name: str = ""


class GlobalValues(ApiModel):
    model_config = _OPEN

    hub: str = "docker.io/istio"
    tag: str = __version__
    image_pull_policy: str = ""
    image_pull_secrets: list[str] = Field(default_factory=list)
    istio_namespace: str = "istio-system"
    logging: Logging = Logging()
    mesh_id: str = Field(default="", alias="meshID")
    network: str = ""
    multi_cluster: MultiCluster = MultiCluster()
    proxy: ProxyValues = ProxyValues()
    proxy_init: ProxyInitValues = ProxyInitValues()


class WebhookValues(ApiModel):
    model_config = _OPEN

    rewrite_app_http_probe: bool = True
    injected_annotations: dict[str, str] = Field(default_factory=dict)


class InjectorValues(ApiModel):
    model_config = _OPEN

    global_: GlobalValues = Field(default=GlobalValues(), alias="global")
    sidecar_injector_webhook: WebhookValues = WebhookValues()
    revision: str = ""

    def image(self, name: str) -> str:
        """Istio's image rule: a name with a '/' is a full image, else hub/name:tag."""
        if "/" in name:
            return name
        return f"{self.global_.hub}/{name}:{self.global_.tag}"
