"""Deployment (apps/v1): what `meshpilot run` starts pods from; the fields it reads are typed,
every other field is kept as written."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from meshpilot.config.base import ApiModel, ObjectMeta, TopLevel

__all__ = ["Deployment", "DeploymentSpec", "PodTemplate"]


class PodTemplate(ApiModel):
    model_config = ApiModel.model_config | {"extra": "allow"}

    metadata: ObjectMeta = ObjectMeta()
    spec: dict[str, Any] = Field(default_factory=dict)


class DeploymentSpec(ApiModel):
    model_config = ApiModel.model_config | {"extra": "allow"}

    replicas: int = Field(default=1, ge=0)
    selector: dict[str, Any] = Field(default_factory=dict)
    template: PodTemplate = PodTemplate()


class Deployment(TopLevel):
    model_config = TopLevel.model_config | {"extra": "allow"}

    spec: DeploymentSpec = DeploymentSpec()
    status: dict[str, Any] = Field(default_factory=dict)
