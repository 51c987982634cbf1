"""Git webhooks (`POST /api/webhook`): GitHub, GitLab, Bitbucket Cloud and Bitbucket Server
push payloads become a PushEvent (repository URLs and pushed branches or tags), as Argo CD's
webhook handler reads them. Each provider's secret is checked first when one is set
(webhook_verify.py). Pull request numbers are remembered by commit (from `pull_request`
events and from merge/squash commit messages) for PR comments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot.gitops.controller.loop import PushEvent
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
        payload = json.loads(body or b"{}")
    except ValueError:
        raise WebhookError("webhook payload is not JSON") from None
    if not isinstance(payload, dict):
        raise WebhookError("webhook payload is not a JSON object")
    if "x-github-event" in headers:
        return _github(headers["x-github-event"], payload)
    if "x-gitlab-event" in headers:
        return _gitlab(payload)
    if headers.get("x-event-key", "").startswith("repo:push"):
        return _bitbucket(payload)
    if provider is Provider.BITBUCKET_SERVER:
        return _bitbucket_server(headers.get("x-event-key", ""), payload)
    raise WebhookError("unknown webhook (expected a GitHub, GitLab or Bitbucket push event)")


def _ref_name(ref: str) -> str:
    return ref.removeprefix("refs/heads/").removeprefix("refs/tags/")


def _urls(*values: Any) -> frozenset[str]:
    return frozenset(str(v) for v in values if isinstance(v, str) and v)


def _changed_files(commits: Any) -> frozenset[str]:
    out: set[str] = set()
    for commit in commits if isinstance(commits, list) else []:
        for field in ("added", "modified", "removed"):
            out.update(str(f) for f in (commit or {}).get(field) or [])
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
    repo = payload.get("repository") or {}
    urls = _urls(repo.get("html_url"), repo.get("clone_url"), repo.get("ssh_url"),
                 repo.get("git_url"), repo.get("url"))  # fmt: skip
    if event == "pull_request":
        pr = payload.get("pull_request") or {}
        number = payload.get("number") or pr.get("number")
        found = {}
        if isinstance(number, int):
            for sha in ((pr.get("head") or {}).get("sha"), pr.get("merge_commit_sha")):
                if isinstance(sha, str) and sha:
                    found[sha] = number
        return Parsed(None, found)
    if event != "push":
        return Parsed(None, {})
    commit = str(payload.get("after") or "")
    head = payload.get("head_commit") or {}
    messages = [str(head.get("message") or "")]
    push = PushEvent(
        repo_urls=urls,
        branches=frozenset({_ref_name(str(payload.get("ref") or ""))}),
        commit=commit,
        default_branch=str(repo.get("default_branch") or repo.get("master_branch") or ""),
        changed_files=_changed_files(payload.get("commits")),
    )
    return Parsed(push, _pr_from_messages(commit, messages))


def _gitlab(payload: dict[str, Any]) -> Parsed:
    project = payload.get("project") or {}
    repo = payload.get("repository") or {}
    urls = _urls(
        project.get("web_url"),
        project.get("git_http_url"),
        project.get("git_ssh_url"),
        repo.get("homepage"),
        repo.get("git_http_url"),
        repo.get("git_ssh_url"),
    )
    commit = str(payload.get("checkout_sha") or payload.get("after") or "")
    messages = [str(c.get("message") or "") for c in payload.get("commits") or [] if c]
    push = PushEvent(
        repo_urls=urls,
        branches=frozenset({_ref_name(str(payload.get("ref") or ""))}),
        commit=commit,
        default_branch=str(project.get("default_branch") or ""),
        changed_files=_changed_files(payload.get("commits")),
    )
    return Parsed(push, _pr_from_messages(commit, messages[-1:]))


def _bitbucket(payload: dict[str, Any]) -> Parsed:
    repo = payload.get("repository") or {}
    full = str(repo.get("full_name") or "")
    html = ((repo.get("links") or {}).get("html") or {}).get("href")
    urls = _urls(html, f"https://bitbucket.org/{full}" if full else None,
                 f"git@bitbucket.org:{full}.git" if full else None)  # fmt: skip
    branches, commit = set(), ""
    for change in (payload.get("push") or {}).get("changes") or []:
        new = (change or {}).get("new") or {}
        if new.get("name"):
            branches.add(str(new["name"]))
            commit = str((new.get("target") or {}).get("hash") or commit)
    push = PushEvent(repo_urls=urls, branches=frozenset(branches), commit=commit)
    return Parsed(push, {})


def _bitbucket_server(event: str, payload: dict[str, Any]) -> Parsed:
    """`repo:refs_changed`: clone links of the repository, refs and their new commits."""
    if event != "repo:refs_changed":
        return Parsed(None, {})  # diagnostics:ping, pull request events
    repo = payload.get("repository") or {}
    links = (repo.get("links") or {}).get("clone") or []
    urls = _urls(*(link.get("href") for link in links if isinstance(link, dict)))
    branches, commit = set(), ""
    for change in payload.get("changes") or []:
        ref = (change or {}).get("ref") or {}
        if ref.get("displayId"):
            branches.add(str(ref["displayId"]))
            commit = str((change or {}).get("toHash") or commit)
    push = PushEvent(repo_urls=urls, branches=frozenset(branches), commit=commit)
    return Parsed(push, {})
