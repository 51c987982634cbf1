"""What the application pages show, read from the API's answers (Application manifests as
`GET /api/v1/applications` returns them): rows, filters, pages, the resource tree. Nothing
here decides a status; it only reads the ones the controller recorded."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from meshpilot.gitops.model import Application

__all__ = ["PAGE_SIZE", "AppRow", "Filters", "KindGroup", "Page", "TreeNode", "tree"]

PAGE_SIZE = 50  # rows per page of the application list (it stays quick with thousands)


def _get(data: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(part)
    return data


def _str(data: Any, *path: str) -> str:
    value = _get(data, *path)
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class AppRow:
    namespace: str
    name: str
    project: str
    repo: str
    path: str
    revision: str
    destination: str  # the destination namespace
    sync: str
    health: str
    operation: str  # the last operation's phase, "" when none

    @classmethod
    def of(cls, manifest: Mapping[str, Any]) -> AppRow:
        spec = manifest.get("spec") or {}
        source: Any = _get(spec, "source") or next(iter(_get(spec, "sources") or []), {})
        return cls(
            namespace=_str(manifest, "metadata", "namespace"),
            name=_str(manifest, "metadata", "name"),
            project=_str(spec, "project") or "default",
            repo=_str(source, "repoURL"),
            path=_str(source, "path") or _str(source, "chart"),
            revision=_str(source, "targetRevision") or "HEAD",
            destination=_str(spec, "destination", "namespace"),
            sync=_str(manifest, "status", "sync", "status") or "Unknown",
            health=_str(manifest, "status", "health", "status") or "Unknown",
            operation=_str(manifest, "status", "operationState", "phase"),
        )

    @classmethod
    def of_model(cls, namespace: str, app: Application) -> AppRow:
        """The same row from the stored model (the list reads 1000s of them: no copies)."""
        spec, status = app.spec, app.status
        source = spec.source or next(iter(spec.sources), None)
        operation = status.operation_state
        return cls(
            namespace=namespace,
            name=app.metadata.name,
            project=spec.project_name,
            repo=source.repo_url if source else "",
            path=(source.path or source.chart) if source else "",
            revision=(source.target_revision or "HEAD") if source else "HEAD",
            destination=spec.destination.namespace,
            sync=str(status.sync.status),
            health=str(status.health.status),
            operation=str(operation.phase) if operation else "",
        )

    @property
    def href(self) -> str:
        return f"/applications/{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Filters:
    """The list's filters, from the query string; "" matches everything."""

    project: str = ""
    sync: str = ""
    health: str = ""
    repo: str = ""
    namespace: str = ""
    search: str = ""

    @classmethod
    def of(cls, query: Mapping[str, list[str]]) -> Filters:
        def one(name: str) -> str:
            return (query.get(name) or [""])[0].strip()

        return cls(one("project"), one("sync"), one("health"), one("repo"), one("namespace"),
                   one("q"))  # fmt: skip

    def match(self, row: AppRow) -> bool:
        return (
            self.project in ("", row.project)
            and self.sync in ("", row.sync)
            and self.health in ("", row.health)
            and self.repo in ("", row.repo)
            and self.namespace in ("", row.destination)
            and self.search.lower() in row.name.lower()
        )

    def query(self, page: int) -> str:
        """The query string of another page with the same filters."""
        from urllib.parse import urlencode

        pairs = {"project": self.project, "sync": self.sync, "health": self.health,
                 "repo": self.repo, "namespace": self.namespace, "q": self.search}  # fmt: skip
        kept = {k: v for k, v in pairs.items() if v}
        return urlencode({**kept, "page": page})


@dataclass(frozen=True, slots=True)
class Page:
    rows: list[AppRow]
    number: int  # from 1
    pages: int
    total: int  # rows matching the filters
    choices: dict[str, list[str]]  # each filter's values among all visible apps

    @classmethod
    def of(cls, rows: Iterable[AppRow], filters: Filters, number: int) -> Page:
        every = sorted(rows, key=lambda r: (r.namespace, r.name))
        choices = {
            "project": sorted({r.project for r in every}),
            "sync": sorted({r.sync for r in every}),
            "health": sorted({r.health for r in every}),
            "repo": sorted({r.repo for r in every}),
            "namespace": sorted({r.destination for r in every}),
        }
        kept = [r for r in every if filters.match(r)]
        pages = max(1, -(-len(kept) // PAGE_SIZE))
        number = min(max(1, number), pages)
        start = (number - 1) * PAGE_SIZE
        return cls(kept[start : start + PAGE_SIZE], number, pages, len(kept), choices)


@dataclass(frozen=True, slots=True)
class TreeNode:
    group: str
    kind: str
    namespace: str
    name: str
    sync: str
    health: str
    health_message: str
    owners: list[str]  # the owner chain of the live object, nearest first ("Kind/name")
    prune: bool  # live only: sync with prune deletes it

    @property
    def ref(self) -> str:
        """The form value that selects this resource for a selective sync."""
        return "/".join((self.group, self.kind, self.namespace, self.name))


@dataclass(frozen=True, slots=True)
class KindGroup:
    kind: str
    nodes: list[TreeNode] = field(default_factory=list)


def tree(
    manifest: Mapping[str, Any], owners: Mapping[tuple[str, str, str], list[str]]
) -> list[KindGroup]:
    """The app's resources (status.resources) grouped by kind; `owners` maps (kind,
    namespace, name) to the live object's owner chain."""
    groups: dict[str, KindGroup] = {}
    for res in _get(manifest, "status", "resources") or []:
        if not isinstance(res, Mapping):
            continue
        kind, ns, name = _str(res, "kind"), _str(res, "namespace"), _str(res, "name")
        node = TreeNode(
            group=_str(res, "group"), kind=kind, namespace=ns, name=name,
            sync=_str(res, "status") or "Unknown",
            health=_str(res, "health", "status"),
            health_message=_str(res, "health", "message"),
            owners=list(owners.get((kind, ns, name), [])),
            prune=bool(res.get("requiresPruning")),
        )  # fmt: skip
        groups.setdefault(kind, KindGroup(kind)).nodes.append(node)
    return [groups[k] for k in sorted(groups)]
