"""The change under review: base and head resolved to commits in the repo service's mirror,
their merge base, and the files the head changed since it (`git diff --name-only`), which is
what a pull request shows."""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.gitops.repo.credentials import select_credential
from meshpilot.gitops.repo.errors import GitCommandError, RepoError
from meshpilot.gitops.repo.fetch import RepoService
from meshpilot.gitops.repo.git import git_auth, run_git
from meshpilot.gitops.repo.urls import scrub

__all__ = ["ChangeSet", "changed_files", "files_mentioning", "read_blob"]


@dataclass(frozen=True, slots=True)
class ChangeSet:
    base_commit: str
    head_commit: str
    merge_base: str
    files: tuple[str, ...]  # repository-relative, sorted


def _git(repos: RepoService, url: str, args: list[str]) -> str:
    cred = select_credential(url, repos.credentials)
    with git_auth(cred, repos.base_env) as env:
        out = run_git(args, env, cwd=repos.mirror_path(url), timeout=repos.timeout)
    return out.stdout.decode("utf-8", "replace")


def changed_files(repos: RepoService, url: str, base: str, head: str) -> ChangeSet:
    """Resolve both revisions (fetching as needed) and list what head changed."""
    base_commit = repos.resolve(url, base)
    head_commit = repos.resolve(url, head)
    try:
        merge_base = _git(repos, url, ["merge-base", base_commit, head_commit]).strip()
    except GitCommandError:
        raise RepoError(f"{scrub(url)}: {base!r} and {head!r} have no common history") from None
    names = _git(repos, url, ["diff", "--name-only", "-z", merge_base, head_commit])
    files = tuple(sorted(n for n in names.split("\0") if n))
    return ChangeSet(base_commit, head_commit, merge_base, files)


def read_blob(repos: RepoService, url: str, commit: str, path: str) -> str | None:
    """The text of `path` at `commit`; None when it does not exist there."""
    try:
        return _git(repos, url, ["show", f"{commit}:{path}"])
    except GitCommandError:
        return None


def files_mentioning(repos: RepoService, url: str, commit: str, text: str) -> list[str]:
    """Manifest files at `commit` that contain `text` (`git grep -l`, no checkout)."""
    args = ["grep", "-l", "-F", text, commit, "--", "*.yaml", "*.yml", "*.json"]
    try:
        out = _git(repos, url, args)
    except GitCommandError:
        return []  # git grep exits 1 when nothing matches
    prefix = f"{commit}:"
    return sorted(line.removeprefix(prefix) for line in out.splitlines() if line)
