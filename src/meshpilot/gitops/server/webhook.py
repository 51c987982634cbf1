"""Git webhooks (`POST /api/webhook`): GitHub, GitLab and Bitbucket Cloud push payloads
become a PushEvent (repository URLs and pushed branches or tags), as Argo CD's webhook
handler reads them. A GitHub `X-Hub-Signature-256` is checked when a secret is set (and
required then); GitLab's `X-Gitlab-Token` likewise. Pull request numbers are remembered by
commit (from `pull_request` events and from merge/squash commit messages) for PR comments.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot import bounded_json
from meshpilot.gitops.controller.loop import PushEvent
from meshpilot.gitops.errors import GitopsError

__all__ = ["Parsed", "WebhookError", "WebhookSecrets", "parse_webhook"]

_PR_IN_MESSAGE = (re.compile(r"^Merge pull request #(\d+)"), re.compile(r"\(#(\d+)\)\s*$"))


class WebhookError(GitopsError):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class WebhookSecrets:
    github: str = ""
    gitlab: str = ""


@dataclass(frozen=True, slots=True)
class Parsed:
    push: PushEvent | None  # None: an event that changes no branch (ping, PR opened)
    pull_requests: Mapping[str, int]  # commit → PR number


def parse_webhook(headers: Mapping[str, str], body: bytes, secrets: WebhookSecrets) -> Parsed:
    """Headers have lower-case names. Raises WebhookError (with an HTTP status)."""
    if "x-github-event" in headers:
        _check_github_signature(headers, body, secrets.github)
    elif "x-gitlab-event" in headers and secrets.gitlab:
        token = headers.get("x-gitlab-token", "")
        if not hmac.compare_digest(token.encode(), secrets.gitlab.encode()):
            raise WebhookError("GitLab webhook token mismatch", 401)
    try:
        payload = bounded_json.loads(body or b"{}")
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
    raise WebhookError("unknown webhook (expected a GitHub, GitLab or Bitbucket push event)")


def _check_github_signature(headers: Mapping[str, str], body: bytes, secret: str) -> None:
    if not secret:
        return
    given = headers.get("x-hub-signature-256", "")
    wanted = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not given:
        raise WebhookError("HMAC verification failed: no X-Hub-Signature-256 header", 401)
    if not hmac.compare_digest(given.encode(), wanted.encode()):
        raise WebhookError("HMAC verification failed", 401)


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
