"""EnvoyFilter: patches to the Envoy configuration istiod generates (applied by xds/patch/)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel
from meshpilot.config.istio.authorization_policy import PolicyTargetReference
from meshpilot.config.istio.common import NetworkingWorkloadSelector

__all__ = ["EnvoyConfigObjectPatch", "EnvoyFilter", "EnvoyFilterSpec", "EnvoyPatch", "ProxyMatch"]


class ProxyMatch(ApiModel):
    proxy_version: str = ""
    metadata: dict[str, str] = Field(default_factory=dict)


class EnvoyConfigObjectMatch(ApiModel):
    context: str = "ANY"
    proxy: ProxyMatch | None = None
    # The object matches stay untyped: their many optional sub-fields only narrow the patch.
    listener: dict[str, Any] | None = None
    route_configuration: dict[str, Any] | None = None
    cluster: dict[str, Any] | None = None


class EnvoyPatch(ApiModel):
    operation: str = "INVALID"
    value: dict[str, Any] | None = None
    filter_class: str = "UNSPECIFIED"


class EnvoyConfigObjectPatch(ApiModel):
    apply_to: str = "INVALID"
    match: EnvoyConfigObjectMatch | None = None
    patch: EnvoyPatch | None = None


class EnvoyFilterSpec(ApiModel):
    workload_selector: NetworkingWorkloadSelector | None = None
    target_refs: list[PolicyTargetReference] = Field(default_factory=list)
    # None entries are kept so that validation can point at `configPatches[i]`.
    config_patches: list[EnvoyConfigObjectPatch | None] = Field(default_factory=list)
    priority: int = 0


class EnvoyFilter(TopLevel):
    spec: EnvoyFilterSpec = EnvoyFilterSpec()
