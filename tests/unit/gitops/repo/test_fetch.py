"""The repo service against real git repositories made in the test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from meshpilot.gitops.repo import (
    RepoCredential,
    RepoService,
    RepoUnreachableError,
    UnknownRevisionError,
    credential_from_secret,
    scrub,
    select_credential,
)
from tests.gitops_fixtures import GitRepo, make_repo


@pytest.fixture
def origin(tmp_path: Path) -> GitRepo:
    return make_repo(tmp_path / "origin", {"app/cm.yaml": "v: 1\n"})


@pytest.fixture
def service(tmp_path: Path) -> RepoService:
    return RepoService(tmp_path / "cache")


def test_resolves_head_branch_tag_and_sha(origin: GitRepo, service: RepoService) -> None:
    first = origin.git("rev-parse", "HEAD")
    origin.git("tag", "-a", "v1", "-m", "release")  # annotated: must peel to the commit
    origin.git("checkout", "-q", "-b", "feature")
    feature = origin.commit({"app/cm.yaml": "v: 2\n"})
    origin.git("checkout", "-q", "main")
    url = str(origin.path)
    assert service.resolve(url, "HEAD") == first
    assert service.resolve(url, "") == first
    assert service.resolve(url, "feature") == feature
    assert service.resolve(url, "v1") == first
    assert service.resolve(url, "refs/heads/feature") == feature
    assert service.resolve(url, feature) == feature
    assert service.resolve(url, feature[:10]) == feature
    assert service.resolve(f"file://{origin.path}", "main") == first


def test_new_commit_is_fetched_and_checked_out(origin: GitRepo, service: RepoService) -> None:
    url = str(origin.path)
    old = service.resolve(url, "main")
    new = origin.commit({"app/cm.yaml": "v: 2\n"})
    assert service.resolve(url, "main") == new
    with service.checkout(url, old) as tree:
        assert (tree / "app/cm.yaml").read_text() == "v: 1\n"
        assert oct(tree.stat().st_mode & 0o777) == "0o700"
        kept = tree
    assert not kept.exists()
    with service.checkout(url, new) as tree:
        assert (tree / "app/cm.yaml").read_text() == "v: 2\n"


def test_one_mirror_per_normalised_url(origin: GitRepo, tmp_path: Path) -> None:
    service = RepoService(tmp_path / "cache")
    service.resolve(str(origin.path), "main")
    service.resolve(f"file://{origin.path}/", "main")
    assert len(list((tmp_path / "cache").glob("*.git"))) == 1


def test_unknown_revision(origin: GitRepo, service: RepoService) -> None:
    with pytest.raises(UnknownRevisionError, match="unable to resolve 'nope' to a commit SHA"):
        service.resolve(str(origin.path), "nope")
    with pytest.raises(UnknownRevisionError):
        service.resolve(str(origin.path), "0" * 40)


def test_unreachable_repo_is_clear_and_scrubbed(service: RepoService) -> None:
    url = "https://user:hunter2@127.0.0.1:9/org/repo.git"
    with pytest.raises(RepoUnreachableError) as err:
        service.resolve(url, "main")
    message = str(err.value)
    assert "https://127.0.0.1:9/org/repo.git: repository not reachable" in message
    assert "hunter2" not in message and "user:" not in message


def test_checkout_of_a_commit_in_the_mirror_only(origin: GitRepo, service: RepoService) -> None:
    url = str(origin.path)
    sha = service.resolve(url, "main")
    origin.git("commit", "-q", "--amend", "-m", "rewritten")  # old commit now unreferenced
    with service.checkout(url, sha) as tree:
        assert (tree / "app/cm.yaml").exists()


def test_longest_prefix_credential_wins() -> None:
    creds = [
        RepoCredential(url="https://git.example.com", username="a", password="p1"),
        RepoCredential(url="https://git.example.com/team", username="b", password="p2"),
        RepoCredential(url="https://other.example.com", username="c", password="p3"),
    ]
    chosen = select_credential("https://git.example.com/team/repo.git", creds)
    assert chosen is not None and chosen.username == "b"
    chosen = select_credential("https://git.example.com/x/repo", creds)
    assert chosen is not None and chosen.username == "a"
    assert select_credential("https://nowhere.example.com/r", creds) is None
    assert "p2" not in repr(creds)


def test_credentials_from_repo_creds_and_repository_secrets() -> None:
    template = credential_from_secret(
        {
            "kind": "Secret",
            "metadata": {
                "name": "argocd-repo-creds-github",
                "namespace": "argocd",
                "labels": {"argocd.argoproj.io/secret-type": "repo-creds"},
            },
            "stringData": {"type": "git", "url": "git@github.com:org", "sshPrivateKey": "KEY"},
        }
    )
    exact = credential_from_secret(
        {
            "metadata": {
                "name": "r",
                "labels": {"argocd.argoproj.io/secret-type": "repository"},
            },
            "data": {"url": "aHR0cHM6Ly9naXQuZXhhbXBsZS5jb20vYS5naXQ=", "password": "cHc="},
        }
    )
    assert template is not None and template.template and template.ssh_private_key == "KEY"
    assert exact is not None and not exact.template and exact.password == "pw"
    assert exact.url == "https://git.example.com/a.git"
    assert credential_from_secret({"metadata": {"name": "plain"}}) is None


def test_scrub_removes_userinfo_and_secrets() -> None:
    text = "fatal: https://bob:tok3n@host/r.git and ssh://git@h/r said tok3n"
    assert scrub(text, ("tok3n",)) == "fatal: https://host/r.git and ssh://h/r said ***"


def test_git_auth_files_are_private_and_removed(tmp_path: Path) -> None:
    from meshpilot.gitops.repo.git import git_auth, run_git

    cred = RepoCredential(url="https://h", username="u", password="pw", ssh_private_key="K")
    with git_auth(cred, url="ssh://git@h/r") as env:  # an ssh URL: the key file is written
        askpass = Path(env.env["GIT_ASKPASS"])
        folder = askpass.parent
        assert {p.name: oct(p.stat().st_mode & 0o777) for p in folder.iterdir()} == {
            "askpass": "0o700",
            "username": "0o600",
            "password": "0o600",
            "id": "0o600",
            "known_hosts": "0o600",
            "owner": "0o600",  # which process made it: removed by the next if that one is killed
        }
        # git's askpass protocol answers with the stored values
        answer = subprocess.run(
            [str(askpass), "Password for 'https://h': "], capture_output=True, text=True, check=True
        ).stdout
        assert answer == "pw\n"
        assert "pw" not in env.env["GIT_SSH_COMMAND"]
        run_git(["--version"], env)
    assert not folder.exists()
