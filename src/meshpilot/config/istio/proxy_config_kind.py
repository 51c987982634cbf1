"""The ProxyConfig kind (networking.istio.io/v1beta1): per-workload proxy settings (validated,
not applied yet). Not the mesh-wide `defaultConfig` model of config/mesh.py."""

from __future__ import annotations

from pydantic import Field

from meshpilot.config.base import ApiModel, TopLevel
from meshpilot.config.istio.common import WorkloadSelector

__all__ = ["ProxyConfigResource", "ProxyConfigSpec", "ProxyImage"]


class ProxyImage(ApiModel):
    image_type: str = ""


class ProxyConfigSpec(ApiModel):
    selector: WorkloadSelector | None = None
    concurrency: int | None = None
    environment_variables: dict[str, str] = Field(default_factory=dict)
    image: ProxyImage | None = None


class ProxyConfigResource(TopLevel):
    spec: ProxyConfigSpec = ProxyConfigSpec()
