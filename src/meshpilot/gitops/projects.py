"""AppProject restrictions for an Application and its resources, as Argo CD enforces them.

Messages are Argo CD's (spec §9.9), so users recognise them:

    Application referencing project p which does not exist
    application repo <url> is not permitted in project 'p'
    application destination {<server> <namespace>} is not permitted in project 'p'
    application 'a' in namespace 'n' is not permitted to use project 'p'
    resource <group>:<kind> is not permitted in project p
    namespace <ns> is not permitted in project 'p'

Where projects live (ours, covering Argo CD's two modes): an Application's project is looked
up in the Application's own namespace first (NS mode: one instance per tenant namespace,
apps and projects together, `sourceNamespaces` not needed), then in the control namespace
(`argocd`; CL mode: the project's `sourceNamespaces` must admit the app's namespace). The
`default` project exists implicitly, permissive, as Argo CD creates it.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping

from meshpilot.gitops.errors import ProjectError
from meshpilot.gitops.model import (
    DEFAULT_PROJECT,
    IN_CLUSTER_NAME,
    IN_CLUSTER_SERVER,
    Application,
    ApplicationDestination,
    AppProject,
    GroupKind,
    default_project,
)

__all__ = [
    "CONTROL_NAMESPACE",
    "ProjectIndex",
    "application_violations",
    "check_application",
    "is_destination_permitted",
    "is_group_kind_permitted",
    "is_source_permitted",
    "normalize_git_url",
    "resource_violation",
]

CONTROL_NAMESPACE = "argocd"


class ProjectIndex:
    """AppProjects by (namespace, name), and the lookup rule of the module docstring."""

    def __init__(
        self, projects: Iterable[AppProject], control_namespace: str = CONTROL_NAMESPACE
    ) -> None:
        self.control_namespace = control_namespace
        self._by_key: Mapping[tuple[str, str], AppProject] = {
            (p.metadata.namespace or "default", p.metadata.name): p for p in projects
        }

    def project_for(self, app: Application) -> AppProject | None:
        name = app.spec.project_name
        app_ns = app.metadata.namespace or "default"
        for namespace in (app_ns, self.control_namespace):
            found = self._by_key.get((namespace, name))
            if found is not None:
                return found
        if name == DEFAULT_PROJECT:
            return default_project(app_ns)
        return None


def normalize_git_url(url: str) -> str:
    """Argo CD's NormalizeGitURL: lower case, no trailing `/` or `.git`, scp-like SSH URLs
    as ssh:// URLs."""
    out = url.strip().lower()
    if "://" not in out and re.match(r"^[\w.-]+@[\w.-]+:", out):
        user_host, _, path = out.partition(":")
        out = f"ssh://{user_host}/{path.lstrip('/')}"
    out = out.rstrip("/")
    return out.removesuffix(".git")


def _glob(pattern: str, value: str, separator: str = "") -> bool:
    """gobwas/glob as Argo CD uses it: `*` matches anything, or anything but the separator
    when one is given (then `**` crosses it)."""
    if pattern == "*":
        return True
    regex = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            regex, i = regex + ".*", i + 2
            continue
        char = pattern[i]
        if char == "*":
            regex += f"[^{re.escape(separator)}]*" if separator else ".*"
        elif char == "?":
            regex += f"[^{re.escape(separator)}]" if separator else "."
        else:
            regex += re.escape(char)
        i += 1
    return re.fullmatch(regex, value) is not None


def _glob_negatable(pattern: str, value: str, separator: str = "") -> bool:
    """Argo CD's globMatch with negation: `!p` matches what `p` does not."""
    if pattern.startswith("!"):
        return not _glob(pattern[1:], value, separator)
    return _glob(pattern, value, separator)


def is_source_permitted(project: AppProject, repo_url: str) -> bool:
    """Whether `sourceRepos` admits the repo (globs with `/` as separator; `!` denies)."""
    src = normalize_git_url(repo_url)
    any_matched = False
    for item in project.spec.source_repos:
        deny = item.startswith("!")
        pattern = ("!" if deny else "") + normalize_git_url(item.removeprefix("!"))
        if _glob_negatable(pattern, src, "/"):
            any_matched = True
        elif deny:
            return False
    return any_matched


def _infer_in_cluster(dest: ApplicationDestination) -> ApplicationDestination:
    """The in-cluster destination is known by both its name and its server."""
    if dest.server == IN_CLUSTER_SERVER and not dest.name:
        return dest.model_copy(update={"name": IN_CLUSTER_NAME})
    if dest.name == IN_CLUSTER_NAME and not dest.server:
        return dest.model_copy(update={"server": IN_CLUSTER_SERVER})
    return dest


def is_destination_permitted(project: AppProject, dest: ApplicationDestination) -> bool:
    """Argo CD's destination match: server or name, and namespace; `!` entries deny."""
    dest = _infer_in_cluster(dest)
    any_matched, denied = False, False
    for item in project.spec.destinations:
        name_ok = bool(dest.name) and _glob_negatable(item.name, dest.name)
        server_ok = bool(dest.server) and _glob_negatable(item.server, dest.server)
        ns_ok = _glob_negatable(item.namespace, dest.namespace)
        cluster_ok = server_ok or name_ok
        cluster_denied = (not name_ok and item.name.startswith("!")) or (
            not server_ok and item.server.startswith("!")
        )
        if cluster_ok and ns_ok:
            any_matched = True
        elif cluster_denied and ns_ok:
            denied = True
        elif cluster_ok and not ns_ok and item.namespace.startswith("!"):
            denied = True  # a `!namespace` entry for this cluster
    return any_matched and not denied


def _in_list(group: str, kind: str, items: list[GroupKind]) -> bool:
    return any(
        fnmatch.fnmatchcase(kind, item.kind) and fnmatch.fnmatchcase(group, item.group)
        for item in items
    )


def is_group_kind_permitted(project: AppProject, group: str, kind: str, namespaced: bool) -> bool:
    """Namespaced kinds: allowed unless whitelisted-away or blacklisted (no whitelist field
    means all). Cluster-scoped kinds: only what `clusterResourceWhitelist` lists."""
    spec = project.spec
    if namespaced:
        white = spec.namespace_resource_whitelist
        listed = white is None or _in_list(group, kind, white)
        return listed and not _in_list(group, kind, spec.namespace_resource_blacklist)
    listed = _in_list(group, kind, spec.cluster_resource_whitelist)
    return listed and not _in_list(group, kind, spec.cluster_resource_blacklist)


def _namespace_permitted(project: AppProject, app: Application, control_namespace: str) -> bool:
    app_ns = app.metadata.namespace or "default"
    if app_ns in (control_namespace, project.metadata.namespace or "default"):
        return True
    for pattern in project.spec.source_namespaces:
        if len(pattern) > 1 and pattern.startswith("/") and pattern.endswith("/"):
            if re.search(pattern[1:-1], app_ns):
                return True
        elif _glob(pattern, app_ns):
            return True
    return False


def application_violations(app: Application, index: ProjectIndex) -> list[str]:
    """Every reason the app's project refuses it (empty: permitted), Argo CD's messages."""
    project = index.project_for(app)
    name = app.spec.project_name
    if project is None:
        return [f"Application referencing project {name} which does not exist"]
    out: list[str] = []
    if not _namespace_permitted(project, app, index.control_namespace):
        app_ns = app.metadata.namespace or "default"
        out.append(
            f"application '{app.metadata.name}' in namespace '{app_ns}'"
            f" is not permitted to use project '{name}'"
        )
    for source in app.spec.all_sources:
        if not is_source_permitted(project, source.repo_url):
            out.append(f"application repo {source.repo_url} is not permitted in project '{name}'")
    if not is_destination_permitted(project, app.spec.destination):
        out.append(
            f"application destination {app.spec.destination} is not permitted in project '{name}'"
        )
    return out


def check_application(app: Application, index: ProjectIndex) -> AppProject:
    """The app's project; ProjectError with every violation when it does not permit the app."""
    problems = application_violations(app, index)
    if problems:
        raise ProjectError(problems)
    project = index.project_for(app)
    assert project is not None  # no violations means the project was found
    return project


def resource_violation(
    project: AppProject,
    app: Application,
    group: str,
    kind: str,
    namespace: str | None,
) -> str | None:
    """Why the project refuses one resource of the app at sync (None: permitted).
    `namespace` is None for cluster-scoped kinds."""
    name = project.metadata.name
    if not is_group_kind_permitted(project, group, kind, namespace is not None):
        return f"resource {group}:{kind} is not permitted in project {name}"
    if namespace is not None:
        dest = app.spec.destination.model_copy(update={"namespace": namespace})
        if not is_destination_permitted(project, dest):
            return f"namespace {namespace} is not permitted in project '{name}'"
    return None
