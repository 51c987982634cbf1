"""AppProject (argoproj.io/v1alpha1) with Argo CD's field names, and the implicit `default`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from meshpilot.config.base import ApiModel, ObjectMeta, TopLevel

__all__ = [
    "DEFAULT_PROJECT",
    "AppProject",
    "AppProjectSpec",
    "GroupKind",
    "ProjectDestination",
    "ProjectRole",
    "SyncWindow",
    "default_project",
]

DEFAULT_PROJECT = "default"


class ProjectDestination(ApiModel):
    server: str = ""
    namespace: str = ""
    name: str = ""


class GroupKind(ApiModel):
    group: str = ""
    kind: str


class SyncWindow(ApiModel):
    kind: Literal["allow", "deny"]
    schedule: str
    duration: str
    applications: list[str] = Field(default_factory=list)
    namespaces: list[str] = Field(default_factory=list)
    clusters: list[str] = Field(default_factory=list)
    manual_sync: bool = False
    time_zone: str = ""


class JwtToken(ApiModel):
    iat: int
    exp: int | None = None
    id: str = ""


class ProjectRole(ApiModel):
    name: str
    description: str = ""
    policies: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    jwt_tokens: list[JwtToken] = Field(default_factory=list)


class OrphanedResources(ApiModel):
    warn: bool | None = None
    ignore: list[dict[str, Any]] = Field(default_factory=list)


class SignatureKey(ApiModel):
    key_id: str = Field(alias="keyID")


class AppProjectSpec(ApiModel):
    description: str = ""
    source_repos: list[str] = Field(default_factory=list)
    destinations: list[ProjectDestination] = Field(default_factory=list)
    source_namespaces: list[str] = Field(default_factory=list)
    cluster_resource_whitelist: list[GroupKind] = Field(default_factory=list)
    cluster_resource_blacklist: list[GroupKind] = Field(default_factory=list)
    # Absent means every namespaced kind; an empty list means none (Argo CD's nil vs []).
    namespace_resource_whitelist: list[GroupKind] | None = None
    namespace_resource_blacklist: list[GroupKind] = Field(default_factory=list)
    sync_windows: list[SyncWindow] = Field(default_factory=list)
    roles: list[ProjectRole] = Field(default_factory=list)
    orphaned_resources: OrphanedResources | None = None
    signature_keys: list[SignatureKey] = Field(default_factory=list)
    destination_service_accounts: list[dict[str, Any]] = Field(default_factory=list)

    @field_validator("source_repos", "source_namespaces")
    @classmethod
    def _no_empty(cls, value: list[str]) -> list[str]:
        if any(not item.strip() for item in value):
            raise ValueError("empty entries are not allowed")
        return value


class AppProject(TopLevel):
    api_version: Literal["argoproj.io/v1alpha1"] = "argoproj.io/v1alpha1"
    kind: Literal["AppProject"] = "AppProject"
    spec: AppProjectSpec = Field(default_factory=AppProjectSpec)
    status: dict[str, Any] = Field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.metadata.name


def default_project(namespace: str) -> AppProject:
    """The `default` project as Argo CD creates it when missing: any repo, any destination,
    any kind."""
    return AppProject(
        metadata=ObjectMeta(name=DEFAULT_PROJECT, namespace=namespace),
        spec=AppProjectSpec(
            source_repos=["*"],
            destinations=[ProjectDestination(server="*", namespace="*", name="*")],
            cluster_resource_whitelist=[GroupKind(group="*", kind="*")],
        ),
    )
