"""A GitOps world for tests: a real git repo with mesh manifests, a real DirectoryStore,
a repo cache and a Renderer, and an Application stored in the store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.gitops.model import Application, register_gitops_kinds
from meshpilot.gitops.refresh import RefreshDeps
from meshpilot.gitops.render import Renderer, RendererConfig
from meshpilot.gitops.repo import RepoService
from meshpilot.store.directory import DirectoryStore
from tests.gitops_fixtures import GitRepo, make_repo

SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: reviews
spec:
  ports:
  - port: 9080
    name: http
"""
DR = """\
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: reviews
spec:
  host: reviews
  subsets:
  - name: v1
    labels: {version: v1}
  - name: v2
    labels: {version: v2}
"""


def vs(v1: int, v2: int, wave: int | None = None) -> str:
    annotations = (
        f'  annotations:\n    argocd.argoproj.io/sync-wave: "{wave}"\n' if wave is not None else ""
    )
    return f"""\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
{annotations}spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {{host: reviews, subset: v1}}
      weight: {v1}
    - destination: {{host: reviews, subset: v2}}
      weight: {v2}
"""


def app_yaml(
    name: str = "shop",
    repo: str = "",
    path: str = "mesh",
    namespace: str = "shop",
    project: str = "default",
    sync_policy: dict[str, Any] | None = None,
    revision: str = "main",
    app_namespace: str = "argocd",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "project": project,
        "source": {"repoURL": repo, "path": path, "targetRevision": revision},
        "destination": {"server": "https://kubernetes.default.svc", "namespace": namespace},
    }
    if sync_policy is not None:
        spec["syncPolicy"] = sync_policy
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": app_namespace},
        "spec": spec,
    }


@dataclass
class World:
    repo: GitRepo
    store: DirectoryStore
    deps: RefreshDeps
    tmp: Path

    def put(self, *objects: dict[str, Any]) -> None:
        self.store.apply([RawDocument("<test>", 1, o, {}) for o in objects])

    def app(self, name: str = "shop", namespace: str = "argocd") -> Application:
        self.store.refresh()
        for obj in self.store.snapshot().of_kind(Kind.APPLICATION):
            if obj.name == name and obj.namespace == namespace:
                assert isinstance(obj.model, Application)
                return obj.model
        raise AssertionError(f"no application {namespace}/{name}")

    def live(self, kind: str, name: str, namespace: str = "shop") -> dict[str, Any] | None:
        from meshpilot.config.keys import ConfigKey

        self.store.refresh()
        return self.store.manifest(ConfigKey(Kind(kind), namespace, name))

    def status(self, name: str = "shop") -> dict[str, Any]:
        from meshpilot.config.keys import ConfigKey

        self.store.refresh()
        manifest = self.store.manifest(ConfigKey(Kind.APPLICATION, "argocd", name))
        assert manifest is not None
        return dict(manifest.get("status") or {})


def make_world(tmp: Path, files: dict[str, str] | None = None, **renderer: Any) -> World:
    register_gitops_kinds()
    repo = make_repo(
        tmp / "repo",
        files if files is not None else {"mesh/svc.yaml": SERVICE, "mesh/dr.yaml": DR,
                                         "mesh/vs.yaml": vs(100, 0)},
    )  # fmt: skip
    store = DirectoryStore(tmp / "store")
    repos = RepoService(tmp / "cache")
    config = RendererConfig(temp_dir=tmp, **renderer)
    deps = RefreshDeps(store=store, renderer=Renderer(repos, config))
    world = World(repo, store, deps, tmp)
    world.put(app_yaml(repo=str(repo.path)))
    return world


def dump(obj: Any) -> str:
    return yaml.safe_dump(obj)
