"""Base classes of the typed object models: camelCase on the wire, unknown fields refused."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = ["ApiModel", "ObjectMeta", "TopLevel"]


class ApiModel(BaseModel):
    """A part of an API object. Field names are snake_case in Python, camelCase in YAML."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=to_camel,
        frozen=True,
        strict=False,
        hide_input_in_errors=True,
    )


class ObjectMeta(ApiModel):
    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    owner_references: list[dict[str, Any]] = Field(default_factory=list)
    finalizers: list[str] = Field(default_factory=list)
    managed_fields: list[dict[str, Any]] = Field(default_factory=list)
    self_link: str = ""


class TopLevel(ApiModel):
    """A whole object: apiVersion, kind, metadata and the kind's own fields."""

    api_version: str
    kind: str
    metadata: ObjectMeta
