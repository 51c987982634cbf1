"""WasmPlugin: a Wasm extension added to the HTTP filter chains of selected workloads, its
config served over ECDS (xds/generate/extensions/)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel
from meshpilot.config.istio.authorization_policy import PolicyTargetReference
from meshpilot.config.istio.common import PortSelector, WorkloadSelector

__all__ = ["EnvVar", "WasmPlugin", "WasmPluginSpec"]


class EnvVar(ApiModel):
    name: str = ""
    value_from: str = "INLINE"
    value: str = ""


class VmConfig(ApiModel):
    env: list[EnvVar] = Field(default_factory=list)


class TrafficSelector(ApiModel):
    mode: str = "CLIENT_AND_SERVER"
    ports: list[PortSelector] = Field(default_factory=list)


class WasmPluginSpec(ApiModel):
    selector: WorkloadSelector | None = None
    target_ref: PolicyTargetReference | None = None
    target_refs: list[PolicyTargetReference] = Field(default_factory=list)
    url: str = ""
    sha256: str = ""
    image_pull_policy: str = "UNSPECIFIED_POLICY"
    image_pull_secret: str = ""
    plugin_config: dict[str, Any] | None = None
    plugin_name: str = ""
    phase: str = "UNSPECIFIED_PHASE"
    priority: int | None = None
    fail_strategy: str = "FAIL_CLOSE"
    vm_config: VmConfig | None = None
    match: list[TrafficSelector] = Field(default_factory=list)
    type: str = "UNSPECIFIED_PLUGIN_TYPE"


class WasmPlugin(TopLevel):
    spec: WasmPluginSpec = WasmPluginSpec()
