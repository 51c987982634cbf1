"""What a preview reports: per app, the manifest changes and, per class of proxies, the
Envoy resources that change. Frozen dataclasses; the renderers (report_*.py) only read them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "AppPreview",
    "Change",
    "Finding",
    "PreviewReport",
    "ProxyDiff",
    "ResourceChange",
    "XdsChange",
]


class Change(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


@dataclass(frozen=True, slots=True)
class ResourceChange:
    """One manifest that differs between base and head; `diff` has Secret values masked."""

    key: str
    change: Change
    diff: str


@dataclass(frozen=True, slots=True)
class XdsChange:
    """One Envoy resource that differs; `details` are short human lines (route weights...)."""

    type: str  # listeners, routes, clusters, endpoints, secrets
    name: str
    change: Change
    details: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ProxyDiff:
    """Proxies of one class (same type, namespace, labels, service account): one translation
    stands for all of them."""

    proxy_type: str  # sidecar or router
    proxies: tuple[str, ...]  # pod.namespace
    changes: tuple[XdsChange, ...]

    def count(self, change: Change) -> int:
        return sum(1 for c in self.changes if c.change is change)


@dataclass(frozen=True, slots=True)
class Finding:
    """A problem of the head revision, as `meshpilot analyze` prints it."""

    file: str
    line: int
    message: str
    object: str = ""
    field: str = ""
    severity: str = "error"
    code: str = ""

    def __str__(self) -> str:
        level = f"{self.severity} {self.code}" if self.code else self.severity
        parts = [f"{self.file}:{self.line}", level]
        parts += [p for p in (self.object, self.field) if p]
        return ": ".join(parts) + ": " + self.message


@dataclass(frozen=True, slots=True)
class AppPreview:
    app: str  # namespace/name
    reason: str  # why it is in the preview, completing "it ...": "changes apps/x/vs.yaml"
    base_commit: str = ""
    head_commit: str = ""
    resources: tuple[ResourceChange, ...] = ()
    findings: tuple[Finding, ...] = ()  # validation and analyzer problems at head
    error: str = ""  # the app could not be rendered at head

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    def count(self, change: Change) -> int:
        return sum(1 for r in self.resources if r.change is change)


@dataclass(frozen=True, slots=True)
class PreviewReport:
    repo: str  # credentials scrubbed
    base: str
    head: str
    merge_base: str
    head_commit: str
    changed_files: tuple[str, ...]
    apps: tuple[AppPreview, ...] = ()
    # the mesh effect of the whole change (every affected app synced), per proxy class
    proxies: tuple[ProxyDiff, ...] = ()
    unchanged_proxies: int = 0  # proxies whose configuration does not change
    # Applications in the live store that were looked at; None: no store was given
    store_applications: int | None = None

    @property
    def changed_proxies(self) -> int:
        return sum(len(p.proxies) for p in self.proxies)

    @property
    def no_app_hint(self) -> str:
        """Why no application was affected, and what to do about it (empty when some was)."""
        if self.apps:
            return ""
        anyway = "or `--app NAME` to preview an app whose render depends on these files anyway"
        if self.store_applications is None:
            return (
                "No store was given (`--store DIR` or $MESHPILOT_STORE), so only Applications "
                "defined in the repository itself were looked at: give `--store DIR` to look "
                f"at the live store's Applications, {anyway}."
            )
        if self.store_applications == 0:
            return (
                "The store holds no Application and none defined in the repository reads these "
                f"paths: give `--store DIR` of the store the apps live in, {anyway}."
            )
        return (
            f"None of the {self.store_applications} Applications in the store, nor any defined "
            "in the repository, reads these paths (their source path, Helm value files, or "
            "their own manifest): use `--app NAME` to preview an app anyway."
        )

    @property
    def failed(self) -> bool:
        """A render failed or the head revision has objects the mesh refuses."""
        return any(a.error or a.errors for a in self.apps)
