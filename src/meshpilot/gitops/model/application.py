"""Application (argoproj.io/v1alpha1) with Argo CD's field names.

Unknown fields are refused with the loader's message (file, line, object, field), as for
every other kind: a misspelt `syncPolicy` must not silently mean "manual sync".
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from meshpilot.config.base import ApiModel, TopLevel
from meshpilot.gitops.model.status import ApplicationStatus

__all__ = [
    "IN_CLUSTER_NAME",
    "IN_CLUSTER_SERVER",
    "Application",
    "ApplicationDestination",
    "ApplicationSource",
    "ApplicationSpec",
    "Automated",
    "Backoff",
    "DirectorySource",
    "EnvEntry",
    "HelmParameter",
    "HelmSource",
    "PluginSource",
    "ResourceIgnoreDifferences",
    "RetryStrategy",
    "SyncPolicy",
]

# Argo CD's names for the cluster it runs in; for meshpilot, the local live store.
IN_CLUSTER_SERVER = "https://kubernetes.default.svc"
IN_CLUSTER_NAME = "in-cluster"


class HelmParameter(ApiModel):
    name: str
    value: str = ""
    force_string: bool = False


class HelmFileParameter(ApiModel):
    name: str
    path: str


class HelmSource(ApiModel):
    value_files: list[str] = Field(default_factory=list)
    # A YAML document as a string (Argo CD's `values`), or the same as an object.
    values: str = ""
    values_object: dict[str, Any] | None = None
    parameters: list[HelmParameter] = Field(default_factory=list)
    file_parameters: list[HelmFileParameter] = Field(default_factory=list)
    release_name: str = ""
    ignore_missing_value_files: bool = False
    skip_crds: bool = False
    pass_credentials: bool = False
    version: str = ""


class DirectorySource(ApiModel):
    recurse: bool = False
    include: str = ""
    exclude: str = ""


class EnvEntry(ApiModel):
    name: str
    value: str = ""


class PluginSource(ApiModel):
    name: str = ""
    env: list[EnvEntry] = Field(default_factory=list)
    parameters: list[dict[str, Any]] = Field(default_factory=list)


class ApplicationSource(ApiModel):
    repo_url: str = Field(alias="repoURL")
    path: str = ""
    target_revision: str = ""
    chart: str = ""
    ref: str = ""
    name: str = ""
    helm: HelmSource | None = None
    directory: DirectorySource | None = None
    plugin: PluginSource | None = None

    @property
    def revision(self) -> str:
        """targetRevision, with Argo CD's default HEAD."""
        return self.target_revision or "HEAD"

    @model_validator(mode="after")
    def _one_tool(self) -> ApplicationSource:
        tools = [n for n in ("helm", "directory", "plugin") if getattr(self, n) is not None]
        if len(tools) > 1:
            raise ValueError(f"multiple application sources defined: {', '.join(tools)}")
        return self


class ApplicationDestination(ApiModel):
    server: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def is_in_cluster(self) -> bool:
        """Whether the destination is the local live store (Argo CD's in-cluster)."""
        return self.server == IN_CLUSTER_SERVER or (
            not self.server and self.name == IN_CLUSTER_NAME
        )

    def __str__(self) -> str:
        """Go's `%v` of the destination, as Argo CD's messages print it: `{server namespace}`."""
        return "{" + f"{self.server or self.name} {self.namespace}" + "}"


class Automated(ApiModel):
    prune: bool = False
    self_heal: bool = False
    allow_empty: bool = False
    enabled: bool | None = None


class Backoff(ApiModel):
    duration: str = "5s"
    factor: int = 2
    max_duration: str = "3m"


class RetryStrategy(ApiModel):
    limit: int = 0
    backoff: Backoff | None = None


class ManagedNamespaceMetadata(ApiModel):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class SyncPolicy(ApiModel):
    automated: Automated | None = None
    sync_options: list[str] = Field(default_factory=list)
    retry: RetryStrategy | None = None
    managed_namespace_metadata: ManagedNamespaceMetadata | None = None

    @property
    def is_automated(self) -> bool:
        return self.automated is not None and self.automated.enabled is not False

    def option(self, name: str) -> str | None:
        """The value of a `Name=value` sync option, e.g. option("CreateNamespace") -> "true"."""
        for item in self.sync_options:
            key, _, value = item.partition("=")
            if key.strip() == name:
                return value.strip()
        return None


class ResourceIgnoreDifferences(ApiModel):
    group: str = ""
    kind: str
    name: str = ""
    namespace: str = ""
    json_pointers: list[str] = Field(default_factory=list)
    jq_path_expressions: list[str] = Field(default_factory=list)
    managed_fields_managers: list[str] = Field(default_factory=list)


class ApplicationSpec(ApiModel):
    project: str = "default"
    source: ApplicationSource | None = None
    sources: list[ApplicationSource] = Field(default_factory=list)
    destination: ApplicationDestination
    sync_policy: SyncPolicy | None = None
    revision_history_limit: int = 10
    ignore_differences: list[ResourceIgnoreDifferences] = Field(default_factory=list)
    info: list[dict[str, str]] = Field(default_factory=list)

    @property
    def all_sources(self) -> list[ApplicationSource]:
        """`sources` when given (Argo CD then ignores `source`), else `[source]`."""
        if self.sources:
            return list(self.sources)
        return [self.source] if self.source is not None else []

    @property
    def project_name(self) -> str:
        return self.project or "default"

    @model_validator(mode="after")
    def _checks(self) -> ApplicationSpec:
        if self.source is None and not self.sources:
            raise ValueError("spec.source or spec.sources is required")
        dest = self.destination
        if dest.server and dest.name:
            raise ValueError(
                f"application destination can't have both name and server defined: "
                f"{dest.name} {dest.server}"
            )
        if not dest.server and not dest.name:
            raise ValueError("application destination server and/or name not specified")
        return self


class Application(TopLevel):
    api_version: Literal["argoproj.io/v1alpha1"] = "argoproj.io/v1alpha1"
    kind: Literal["Application"] = "Application"
    spec: ApplicationSpec
    # A requested operation (Argo CD puts `operation` beside spec, e.g. {sync: {...}}).
    operation: dict[str, Any] | None = None
    status: ApplicationStatus = Field(default_factory=ApplicationStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace
