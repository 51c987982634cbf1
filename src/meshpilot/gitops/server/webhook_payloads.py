"""The parts of GitHub, GitLab, Bitbucket Cloud and Server webhook payloads that `POST /api/webhook`
reads, as typed models: a field of the wrong type is refused with a 400 naming it, instead
of failing deep inside the handler. Every field is optional (null included, as the hosts
send for a deleted branch's head commit) and anything else in a payload is ignored."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "BitbucketPush",
    "BitbucketServerPush",
    "GithubPullRequestEvent",
    "GithubPush",
    "GitlabPush",
    "PushCommit",
]


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class PushCommit(_Part):
    message: str | None = None
    added: list[str] | None = None
    modified: list[str] | None = None
    removed: list[str] | None = None


class _GithubRepository(_Part):
    html_url: str | None = None
    clone_url: str | None = None
    ssh_url: str | None = None
    git_url: str | None = None
    url: str | None = None
    default_branch: str | None = None
    master_branch: str | None = None


class GithubPush(_Part):
    repository: _GithubRepository | None = None
    ref: str | None = None
    after: str | None = None
    head_commit: PushCommit | None = None
    commits: list[PushCommit | None] | None = None


class _Sha(_Part):
    sha: str | None = None


class _PullRequest(_Part):
    number: int | None = None
    head: _Sha | None = None
    merge_commit_sha: str | None = None


class GithubPullRequestEvent(_Part):
    number: int | None = None
    pull_request: _PullRequest | None = None


class _GitlabProject(_Part):
    web_url: str | None = None
    git_http_url: str | None = None
    git_ssh_url: str | None = None
    default_branch: str | None = None


class _GitlabRepository(_Part):
    homepage: str | None = None
    git_http_url: str | None = None
    git_ssh_url: str | None = None


class GitlabPush(_Part):
    project: _GitlabProject | None = None
    repository: _GitlabRepository | None = None
    ref: str | None = None
    checkout_sha: str | None = None
    after: str | None = None
    commits: list[PushCommit | None] | None = None


class _Href(_Part):
    href: str | None = None


class _BitbucketLinks(_Part):
    html: _Href | None = None


class _BitbucketRepository(_Part):
    full_name: str | None = None
    links: _BitbucketLinks | None = None


class _Target(_Part):
    hash: str | None = None


class _RefState(_Part):
    name: str | None = None
    target: _Target | None = None


class _Change(_Part):
    new: _RefState | None = None


class _BitbucketPushBody(_Part):
    changes: list[_Change | None] | None = None


class BitbucketPush(_Part):
    repository: _BitbucketRepository | None = None
    push: _BitbucketPushBody | None = Field(default=None)


class _ServerLinks(_Part):
    clone: list[_Href | None] | None = None


class _ServerRepository(_Part):
    links: _ServerLinks | None = None


class _ServerRef(_Part):
    display_id: str | None = Field(default=None, alias="displayId")


class _ServerChange(_Part):
    ref: _ServerRef | None = None
    to_hash: str | None = Field(default=None, alias="toHash")


class BitbucketServerPush(_Part):
    """Bitbucket Server (Data Center) `repo:refs_changed`."""

    repository: _ServerRepository | None = None
    changes: list[_ServerChange | None] | None = None
