"""The repo service against OpenSSH's sshd: sshPrivateKey from a repo-creds Secret, host
keys from argocd-ssh-known-hosts-cm, unknown hosts refused unless `insecure`."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from meshpilot.gitops.repo import RepoService, RepoUnreachableError, credential_from_secret
from meshpilot.gitops.repo.trust import RepoTrust, trust_from_configmaps
from tests.gitops_fixtures import make_repo
from tests.gitops_servers import Sshd, SshKey, bare_clone, new_ssh_key, run_sshd


@dataclass
class Setup:
    sshd: Sshd
    client: SshKey
    url: str


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("ssh")
    work = make_repo(root / "work", {"apps/cm.yaml": "kind: ConfigMap\n"})
    bare = bare_clone(work.path, root / "srv" / "app.git")
    client = new_ssh_key()
    with run_sshd(root / "sshd", [client.public_line]) as sshd:
        yield Setup(sshd, client, f"ssh://root@127.0.0.1:{sshd.port}{bare}")


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def creds_secret(url: str, key: str, **extra: str) -> dict[str, Any]:
    return {
        "kind": "Secret",
        "metadata": {
            "name": "ssh-creds",
            "namespace": "argocd",
            "labels": {"argocd.argoproj.io/secret-type": "repo-creds"},
        },
        "stringData": {"type": "git", "url": url, "sshPrivateKey": key, **extra},
    }


def known_hosts(*lines: str) -> RepoTrust:
    cm = {
        "kind": "ConfigMap",
        "metadata": {"name": "argocd-ssh-known-hosts-cm", "namespace": "argocd"},
        "data": {"ssh_known_hosts": "".join(line + "\n" for line in lines)},
    }
    return trust_from_configmaps([cm])


def service(tmp_path: Path, secret: dict[str, Any], trust: RepoTrust) -> RepoService:
    cred = credential_from_secret(secret)
    assert cred is not None
    return RepoService(tmp_path / "cache", [cred], timeout=30, trust=trust)


def test_clone_with_key_from_secret_and_known_host(
    setup: Setup, tmp_path: Path, private_tmp: Path
) -> None:
    prefix = f"ssh://root@127.0.0.1:{setup.sshd.port}/"
    repos = service(
        tmp_path,
        creds_secret(prefix, setup.client.private_openssh),
        known_hosts(
            f"github.com {new_ssh_key().public_line}",  # another host's entry is ignored
            setup.sshd.known_hosts_line,
        ),
    )
    commit = repos.resolve(setup.url, "main")
    with repos.checkout(setup.url, commit) as tree:
        assert (tree / "apps/cm.yaml").read_text() == "kind: ConfigMap\n"
    assert list(private_tmp.iterdir()) == []  # key and known_hosts files removed


def test_unknown_host_is_refused_with_a_clear_message(
    setup: Setup, tmp_path: Path, private_tmp: Path
) -> None:
    secret = creds_secret(setup.url, setup.client.private_openssh)
    with pytest.raises(RepoUnreachableError) as err:
        service(tmp_path, secret, RepoTrust()).resolve(setup.url, "main")
    message = str(err.value)
    assert f"ssh host key of [127.0.0.1]:{setup.sshd.port} is unknown" in message
    assert "argocd-ssh-known-hosts-cm" in message
    assert 'insecure: "true"' in message
    # a different key for the same host is refused too (no trust on first use)
    impostor = f"[127.0.0.1]:{setup.sshd.port} {new_ssh_key().public_line}"
    with pytest.raises(RepoUnreachableError, match="is unknown"):
        service(tmp_path, secret, known_hosts(impostor)).resolve(setup.url, "main")
    assert list(private_tmp.iterdir()) == []


def test_insecure_skips_the_host_key_check(setup: Setup, tmp_path: Path) -> None:
    secret = creds_secret(setup.url, setup.client.private_openssh, insecure="true")
    assert len(service(tmp_path, secret, RepoTrust()).resolve(setup.url, "main")) == 40


def test_wrong_key_is_refused_without_showing_it(
    setup: Setup, tmp_path: Path, private_tmp: Path
) -> None:
    stranger = new_ssh_key()
    secret = creds_secret(setup.url, stranger.private_openssh)
    with pytest.raises(RepoUnreachableError) as err:
        service(tmp_path, secret, known_hosts(setup.sshd.known_hosts_line)).resolve(
            setup.url, "main"
        )
    message = str(err.value)
    assert (
        "authentication failed with credentials from repo-creds Secret argocd/ssh-creds" in message
    )
    assert "Permission denied (publickey)" in message
    body = stranger.private_openssh.splitlines()[1]
    assert body not in message and "PRIVATE KEY" not in message
    assert list(private_tmp.iterdir()) == []
