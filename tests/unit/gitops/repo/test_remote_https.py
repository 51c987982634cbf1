"""The repo service against a real git smart-HTTP server (git http-backend) over TLS with
Basic auth: credentials from repo-creds Secrets, the server CA from argocd-tls-certs-cm."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from meshpilot.gitops.repo import RepoService, RepoUnreachableError, credential_from_secret
from meshpilot.gitops.repo.trust import RepoTrust, trust_from_configmaps
from tests.gitops_fixtures import make_repo
from tests.gitops_servers import (
    GitHttpsServer,
    bare_clone,
    client_certificate,
    git_https_server,
    make_ca,
)

PASSWORD = "correct-horse-battery"
WRONG = "hunter2-wrong"


def secret(name: str, kind: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": "argocd",
            "labels": {"argocd.argoproj.io/secret-type": kind},
        },
        "stringData": data,
    }


def tls_certs_cm(pem: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "argocd-tls-certs-cm", "namespace": "argocd"},
        "data": {"127.0.0.1": pem},
    }


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Our own temp root, so we can prove no credential file is left behind."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


@pytest.fixture
def server(tmp_path: Path) -> Iterator[GitHttpsServer]:
    work = make_repo(tmp_path / "work", {"apps/cm.yaml": "kind: ConfigMap\n"})
    bare_clone(work.path, tmp_path / "srv" / "org" / "app.git")
    with git_https_server(
        tmp_path / "srv", {"alice": PASSWORD}, make_ca(), tmp_path / "tls"
    ) as srv:
        yield srv


def service(tmp_path: Path, secrets: list[dict[str, Any]], trust: RepoTrust) -> RepoService:
    creds = [c for c in (credential_from_secret(s) for s in secrets) if c is not None]
    return RepoService(tmp_path / "cache", creds, timeout=30, trust=trust)


def test_clone_with_longest_prefix_creds_and_ca_from_configmap(
    tmp_path: Path, server: GitHttpsServer, private_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secrets = [
        secret("host-wide", "repo-creds", url=server.base_url, username="alice", password=WRONG),
        secret(
            "org", "repo-creds", url=f"{server.base_url}/org", username="alice", password=PASSWORD
        ),
    ]
    repos = service(tmp_path, secrets, trust_from_configmaps([tls_certs_cm(server.ca_pem)]))
    url = f"{server.base_url}/org/app.git"
    commit = repos.resolve(url, "main")
    with repos.checkout(url, commit) as tree:
        assert (tree / "apps/cm.yaml").read_text() == "kind: ConfigMap\n"
    # the org-wide (longer) prefix was used: the server saw alice authenticated
    assert ("GET", "/org/app.git/info/refs", "alice") in server.log.entries
    assert list(private_tmp.iterdir()) == []  # askpass, password and CA files removed
    assert PASSWORD not in caplog.text


def test_wrong_password_is_clear_and_never_shown(
    tmp_path: Path, server: GitHttpsServer, private_tmp: Path
) -> None:
    secrets = [secret("org", "repo-creds", url=server.base_url, username="alice", password=WRONG)]
    repos = service(tmp_path, secrets, trust_from_configmaps([tls_certs_cm(server.ca_pem)]))
    with pytest.raises(RepoUnreachableError) as err:
        repos.resolve(f"{server.base_url}/org/app.git", "main")
    message = str(err.value)
    assert "authentication failed with credentials from repo-creds Secret argocd/org" in message
    assert f"{server.base_url}/org/app.git" in message
    assert WRONG not in message
    assert list(private_tmp.iterdir()) == []


def test_userinfo_in_url_is_never_printed(
    tmp_path: Path, server: GitHttpsServer, private_tmp: Path
) -> None:
    repos = service(tmp_path, [], trust_from_configmaps([tls_certs_cm(server.ca_pem)]))
    url = f"https://alice:{WRONG}@{server.base_url.removeprefix('https://')}/org/app.git"
    with pytest.raises(RepoUnreachableError) as err:
        repos.resolve(url, "main")
    assert WRONG not in str(err.value)
    assert "alice:" not in str(err.value)
    assert "Authentication failed" in str(err.value)


def test_untrusted_ca_is_refused_and_insecure_skips_the_check(
    tmp_path: Path, server: GitHttpsServer, private_tmp: Path
) -> None:
    url = f"{server.base_url}/org/app.git"
    creds = [secret("org", "repo-creds", url=server.base_url, username="alice", password=PASSWORD)]
    with pytest.raises(
        RepoUnreachableError, match=r"TLS certificate is not trusted.*argocd-tls-certs-cm"
    ):
        service(tmp_path, creds, RepoTrust()).resolve(url, "main")
    # a CA for another host does not help
    other = trust_from_configmaps(
        [{**tls_certs_cm(server.ca_pem), "data": {"git.example.com": server.ca_pem}}]
    )
    with pytest.raises(RepoUnreachableError, match="not trusted"):
        service(tmp_path, creds, other).resolve(url, "main")
    insecure = [
        secret("repo", "repository", url=url, username="alice", password=PASSWORD, insecure="true")
    ]
    assert len(service(tmp_path, insecure, RepoTrust()).resolve(url, "main")) == 40
    assert list(private_tmp.iterdir()) == []


def test_fetch_picks_up_a_new_commit(tmp_path: Path, server: GitHttpsServer) -> None:
    secrets = [
        secret("org", "repo-creds", url=server.base_url, username="alice", password=PASSWORD)
    ]
    repos = service(tmp_path, secrets, trust_from_configmaps([tls_certs_cm(server.ca_pem)]))
    url = f"{server.base_url}/org/app.git"
    first = repos.resolve(url, "main")
    work = make_repo(tmp_path / "work2")
    work.git("remote", "add", "origin", str(tmp_path / "srv" / "org" / "app.git"))
    work.git("fetch", "-q", "origin")
    work.git("reset", "-q", "--hard", "origin/main")
    second = work.commit({"apps/cm.yaml": "kind: ConfigMap\nv: 2\n"})
    work.git("push", "-q", "origin", "HEAD:main")
    assert first != second
    assert repos.resolve(url, "main") == second
    with repos.checkout(url, second) as tree:
        assert "v: 2" in (tree / "apps/cm.yaml").read_text()


def test_client_certificate_from_the_secret(tmp_path: Path, private_tmp: Path) -> None:
    """tlsClientCertData / tlsClientCertKey: mutual TLS with the repository server."""
    work = make_repo(tmp_path / "work", {"a.yaml": "a: 1\n"})
    bare_clone(work.path, tmp_path / "srv" / "app.git")
    client_ca = make_ca("client CA")
    cert, key = client_certificate(client_ca)
    users = {"alice": PASSWORD}
    with git_https_server(tmp_path / "srv", users, make_ca(), tmp_path / "tls", client_ca) as srv:
        trust = trust_from_configmaps([tls_certs_cm(srv.ca_pem)])
        url = f"{srv.base_url}/app.git"
        plain = secret("r", "repository", url=url, username="alice", password=PASSWORD)
        with pytest.raises(RepoUnreachableError) as err:
            service(tmp_path, [plain], trust).resolve(url, "main")
        assert PASSWORD not in str(err.value)
        mtls = secret(
            "r",
            "repository",
            url=url,
            username="alice",
            password=PASSWORD,
            tlsClientCertData=cert,
            tlsClientCertKey=key,
        )
        assert len(service(tmp_path, [mtls], trust).resolve(url, "main")) == 40
    assert list(private_tmp.iterdir()) == []
