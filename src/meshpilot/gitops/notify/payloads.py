"""What notifiers send: a Slack-compatible incoming-webhook message and a GitHub PR comment.

Both are built from `NotificationEvent` facts only (names, statuses, revision, the
operation's message), never from manifests; the delivery step still redacts every known
Secret value from the final strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from meshpilot.gitops.notify.events import EventType, NotificationEvent
from meshpilot.gitops.repo.urls import scrub

__all__ = [
    "GitHubComment",
    "app_link",
    "github_comment",
    "repo_full_name",
    "repo_web_url",
    "revision_link",
    "slack_payload",
]

_TITLES = {
    EventType.SYNC_RUNNING: ("Sync started", "#0DADEA", ":arrows_counterclockwise:"),
    EventType.SYNC_SUCCEEDED: ("Sync succeeded", "#18be52", ":white_check_mark:"),
    EventType.SYNC_FAILED: ("Sync failed", "#E96D76", ":x:"),
    EventType.OUT_OF_SYNC: ("Out of sync", "#f4c030", ":warning:"),
    EventType.HEALTH_DEGRADED: ("Health degraded", "#f4c030", ":broken_heart:"),
}
_SSH = re.compile(r"^(?:ssh://)?[^@/\s]+@([^:/\s]+)[:/](.+)$")


def repo_web_url(repo_url: str) -> str | None:
    """`git@github.com:org/repo.git` or `https://github.com/org/repo.git` ->
    `https://github.com/org/repo`; None for local paths and unknown schemes."""
    url = scrub(repo_url.strip())
    match = _SSH.match(url)
    if match and not url.startswith(("http://", "https://")):
        url = f"https://{match.group(1)}/{match.group(2)}"
    if not url.startswith(("http://", "https://")):
        return None
    return url.rstrip("/").removesuffix(".git")


def repo_full_name(repo_url: str) -> tuple[str, str] | None:
    """(owner, repo) of a GitHub-like URL."""
    web = repo_web_url(repo_url)
    if web is None:
        return None
    parts = web.split("://", 1)[1].split("/")
    if len(parts) < 3:
        return None
    return parts[-2], parts[-1]


def revision_link(repo_url: str, revision: str) -> str | None:
    """`<repo>/commit/<sha>` for GitHub-like hosts (the URL Argo CD's templates build)."""
    web = repo_web_url(repo_url)
    if web is None or not revision:
        return None
    host = web.split("://", 1)[1].split("/")[0].lower()
    if "bitbucket" in host:
        return f"{web}/commits/{revision}"
    return f"{web}/commit/{revision}"


def app_link(base_url: str, event: NotificationEvent) -> str:
    """`<base-url>/applications/<app>` (`<ns>/<app>` outside the control namespace)."""
    base = base_url.rstrip("/") or "http://127.0.0.1:8080"
    app = event.app
    name = app.name if app.namespace in ("", "argocd") else f"{app.namespace}/{app.name}"
    return f"{base}/applications/{name}"


def _summary(event: NotificationEvent) -> str:
    title = _TITLES[event.type][0]
    app = event.app
    detail = {
        EventType.SYNC_RUNNING: "has started syncing",
        EventType.SYNC_SUCCEEDED: "has been synced successfully",
        EventType.SYNC_FAILED: "failed to sync",
        EventType.OUT_OF_SYNC: "is out of sync with Git",
        EventType.HEALTH_DEGRADED: "has degraded health",
    }[event.type]
    return f"{title}: application {app.name} {detail}."


def slack_payload(event: NotificationEvent, base_url: str) -> dict[str, Any]:
    """An incoming-webhook message: `text` for notifications, an attachment and blocks."""
    title, color, emoji = _TITLES[event.type]
    app = event.app
    link = app_link(base_url, event)
    revision = event.revision
    rev_url = revision_link(app.repo_url, revision)
    rev_text = f"<{rev_url}|{revision[:12]}>" if rev_url else (revision[:12] or "unknown")
    message = app.operation_message or app.health_message
    fields = [
        {"title": "Sync Status", "value": str(app.sync_status), "short": True},
        {"title": "Health", "value": str(app.health_status), "short": True},
        {"title": "Repository", "value": scrub(app.repo_url), "short": True},
        {"title": "Revision", "value": rev_text, "short": True},
    ]
    if message:
        fields.append({"title": "Message", "value": message, "short": False})
    text = f"{emoji} {_summary(event)}"
    block_text = f"*{title}* <{link}|{app.name}>\nRevision: {rev_text}"
    if message:
        block_text += f"\n{message}"
    return {
        "text": text,
        "attachments": [
            {
                "color": color,
                "title": app.name,
                "title_link": link,
                "fields": fields,
                "ts": event.time,
            }
        ],
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": block_text}}],
    }


@dataclass(frozen=True, slots=True)
class GitHubComment:
    """POST {api}/repos/{owner}/{repo}/issues/{number}/comments with {"body": ...}."""

    owner: str
    repo: str
    number: int
    body: str

    @property
    def path(self) -> str:
        return f"/repos/{self.owner}/{self.repo}/issues/{self.number}/comments"

    @property
    def payload(self) -> dict[str, str]:
        return {"body": self.body}


def github_comment(event: NotificationEvent, base_url: str) -> GitHubComment | None:
    """The PR comment for `event`; None when the repo is not GitHub-like or no PR is known."""
    name = repo_full_name(event.app.repo_url)
    if name is None or event.pull_request is None:
        return None
    title, _, emoji = _TITLES[event.type]
    app = event.app
    revision = event.revision
    rev_url = revision_link(app.repo_url, revision)
    rev_md = f"[`{revision[:7]}`]({rev_url})" if rev_url else f"`{revision[:7]}`"
    lines = [
        f"{emoji} **{title}**: [{app.name}]({app_link(base_url, event)}) at {rev_md}",
        "",
        "| Application | Project | Sync | Health |",
        "|---|---|---|---|",
        f"| {app.name} | {app.project} | {app.sync_status} | {app.health_status} |",
    ]
    message = app.operation_message or app.health_message
    if message:
        lines += ["", f"> {message}"]
    return GitHubComment(name[0], name[1], event.pull_request, "\n".join(lines))
