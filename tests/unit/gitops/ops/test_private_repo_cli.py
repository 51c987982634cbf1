"""`meshpilot gitops sync` from a private HTTPS repository: the CLI takes the credentials
from a repo-creds Secret and the server's CA from argocd-tls-certs-cm in the store, as Argo
CD takes them from its namespace, and never prints the password."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from meshpilot.cli.main import cli
from tests.gitops_fixtures import make_repo
from tests.gitops_servers import GitHttpsServer, bare_clone, git_https_server, make_ca
from tests.unit.gitops.ops.env import DR, SERVICE, app_yaml, make_world, vs

PASSWORD = "s3cret-horse-battery"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[GitHttpsServer]:
    files = {"mesh/svc.yaml": SERVICE, "mesh/dr.yaml": DR, "mesh/vs.yaml": vs(80, 20)}
    work = make_repo(tmp_path / "work", files)
    bare_clone(work.path, tmp_path / "srv" / "org" / "mesh.git")
    with git_https_server(
        tmp_path / "srv", {"alice": PASSWORD}, make_ca(), tmp_path / "tls"
    ) as srv:
        yield srv


def _repo_creds(url: str, password: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "org-creds",
            "namespace": "argocd",
            "labels": {"argocd.argoproj.io/secret-type": "repo-creds"},
        },
        "stringData": {"url": url, "username": "alice", "password": password},
    }


def _tls_certs(pem: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "argocd-tls-certs-cm", "namespace": "argocd"},
        "data": {"127.0.0.1": pem},
    }


def _sync(store: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["gitops", "sync", "shop", "--store", str(store)])
    return result.exit_code, result.output


def test_sync_from_private_https_repo_with_creds_from_the_store(
    tmp_path: Path, server: GitHttpsServer
) -> None:
    world = make_world(tmp_path / "w")
    url = f"{server.base_url}/org/mesh.git"
    world.put(app_yaml(repo=url), _tls_certs(server.ca_pem))

    code, out = _sync(world.store.root)  # no credentials yet: refused by the server
    assert code == 1 and PASSWORD not in out

    world.put(_repo_creds(f"{server.base_url}/org", "wrong-password"))
    code, out = _sync(world.store.root)
    assert code == 1
    assert "authentication failed" in out and "wrong-password" not in out

    world.put(_repo_creds(f"{server.base_url}/org", PASSWORD))
    code, out = _sync(world.store.root)
    assert code == 0, out
    assert PASSWORD not in out
    live = world.live("VirtualService", "reviews")
    assert live is not None
    assert [r["weight"] for r in live["spec"]["http"][0]["route"]] == [80, 20]
    assert ("POST", "/org/mesh.git/git-upload-pack", "alice") in server.log.entries
