"""Git webhooks (`POST /api/webhook`): GitHub, GitLab, Bitbucket Cloud and Bitbucket Server
push payloads become a PushEvent (repository URLs and pushed branches or tags), as Argo CD's
webhook handler reads them. Each provider's secret is checked first when one is set
(webhook_verify.py). Pull request numbers are remembered by commit (from `pull_request`
events and from merge/squash commit messages) for PR comments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot import http1
from meshpilot.gitops.controller.loop import PushEvent
from meshpilot.gitops.server.webhook_payloads import (
    BitbucketPush,
    BitbucketServerPush,
    GithubPullRequestEvent,
    GithubPush,
    GitlabPush,
    PushCommit,
)
from meshpilot.gitops.server.webhook_verify import (
    Provider,
    WebhookError,
    WebhookSecrets,
    provider_of,
    verify_webhook,
)

__all__ = ["Parsed", "WebhookError", "WebhookSecrets", "parse_webhook"]

_PR_IN_MESSAGE = (re.compile(r"^Merge pull request #(\d+)"), re.compile(r"\(#(\d+)\)\s*$"))


@dataclass(frozen=True, slots=True)
class Parsed:
    push: PushEvent | None  # None: an event that changes no branch (ping, PR opened)
    pull_requests: Mapping[str, int]  # commit → PR number


def parse_webhook(headers: Mapping[str, str], body: bytes, secrets: WebhookSecrets) -> Parsed:
    """Headers have lower-case names. Raises WebhookError (with an HTTP status)."""
    provider = provider_of(headers)
    verify_webhook(provider, headers, body, secrets)
    try:
        payload = http1.parse_json(body or b"{}", "webhook payload")
        if not isinstance(payload, dict):
            raise http1.BadRequest("webhook payload is not a JSON object")
        if "x-github-event" in headers:
            return _github(headers["x-github-event"], payload)
        if "x-gitlab-event" in headers:
            return _gitlab(http1.validate(GitlabPush, payload, "webhook payload"))
        if headers.get("x-event-key", "").startswith("repo:push"):
            return _bitbucket(http1.validate(BitbucketPush, payload, "webhook payload"))
        if provider is Provider.BITBUCKET_SERVER:
            event = headers.get("x-event-key", "")
            return _bitbucket_server(
                event, http1.validate(BitbucketServerPush, payload, "webhook payload")
            )
    except http1.BadRequest as exc:
        raise WebhookError(str(exc)) from None
    raise WebhookError("unknown webhook (expected a GitHub, GitLab or Bitbucket push event)")


def _ref_name(ref: str) -> str:
    return ref.removeprefix("refs/heads/").removeprefix("refs/tags/")


def _urls(*values: str | None) -> frozenset[str]:
    return frozenset(v for v in values if v)


def _changed_files(commits: list[PushCommit | None] | None) -> frozenset[str]:
    out: set[str] = set()
    for commit in commits or []:
        if commit is not None:
            for files in (commit.added, commit.modified, commit.removed):
                out.update(files or [])
    return frozenset(out)


def _pr_from_messages(commit: str, messages: list[str]) -> dict[str, int]:
    for message in messages:
        first = message.splitlines()[0] if message else ""
        for pattern in _PR_IN_MESSAGE:
            match = pattern.search(first)
            if match and commit:
                return {commit: int(match.group(1))}
    return {}


def _github(event: str, payload: dict[str, Any]) -> Parsed:
    if event == "pull_request":
        pull = http1.validate(GithubPullRequestEvent, payload, "webhook payload")
        pr = pull.pull_request
        number = pull.number or (pr.number if pr else None)
        found = {}
        if number is not None and pr is not None:
            for sha in (pr.head.sha if pr.head else None, pr.merge_commit_sha):
                if sha:
                    found[sha] = number
        return Parsed(None, found)
    if event != "push":
        return Parsed(None, {})
    push = http1.validate(GithubPush, payload, "webhook payload")
    repo = push.repository
    urls = _urls(*(
        (repo.html_url, repo.clone_url, repo.ssh_url, repo.git_url, repo.url) if repo else ()
    ))  # fmt: skip
    commit = push.after or ""
    messages = [(push.head_commit.message or "") if push.head_commit else ""]
    event_ = PushEvent(
        repo_urls=urls,
        branches=frozenset({_ref_name(push.ref or "")}),
        commit=commit,
        default_branch=(repo.default_branch or repo.master_branch or "") if repo else "",
        changed_files=_changed_files(push.commits),
    )
    return Parsed(event_, _pr_from_messages(commit, messages))


def _gitlab(payload: GitlabPush) -> Parsed:
    project, repo = payload.project, payload.repository
    urls = _urls(
        *((project.web_url, project.git_http_url, project.git_ssh_url) if project else ()),
        *((repo.homepage, repo.git_http_url, repo.git_ssh_url) if repo else ()),
    )
    commit = payload.checkout_sha or payload.after or ""
    messages = [c.message or "" for c in payload.commits or [] if c]
    push = PushEvent(
        repo_urls=urls,
        branches=frozenset({_ref_name(payload.ref or "")}),
        commit=commit,
        default_branch=(project.default_branch or "") if project else "",
        changed_files=_changed_files(payload.commits),
    )
    return Parsed(push, _pr_from_messages(commit, messages[-1:]))


def _bitbucket(payload: BitbucketPush) -> Parsed:
    repo = payload.repository
    full = (repo.full_name or "") if repo else ""
    html = repo.links.html.href if repo and repo.links and repo.links.html else None
    urls = _urls(html, f"https://bitbucket.org/{full}" if full else None,
                 f"git@bitbucket.org:{full}.git" if full else None)  # fmt: skip
    branches, commit = set(), ""
    for change in (payload.push.changes if payload.push else None) or []:
        new = change.new if change else None
        if new is not None and new.name:
            branches.add(new.name)
            commit = (new.target.hash if new.target else None) or commit
    push = PushEvent(repo_urls=urls, branches=frozenset(branches), commit=commit)
    return Parsed(push, {})


def _bitbucket_server(event: str, payload: BitbucketServerPush) -> Parsed:
    """`repo:refs_changed`: clone links of the repository, refs and their new commits."""
    if event != "repo:refs_changed":
        return Parsed(None, {})  # diagnostics:ping, pull request events
    links = payload.repository.links if payload.repository else None
    urls = _urls(*(link.href for link in (links.clone if links else None) or [] if link))
    branches, commit = set(), ""
    for change in payload.changes or []:
        ref = change.ref if change else None
        if change is not None and ref is not None and ref.display_id:
            branches.add(ref.display_id)
            commit = change.to_hash or commit
    push = PushEvent(repo_urls=urls, branches=frozenset(branches), commit=commit)
    return Parsed(push, {})
