"""Notifications on Application status transitions (Argo CD Notifications and
argocd-commenter): sync started/succeeded/failed, out of sync, health degraded, sent to a
Slack-compatible incoming webhook and as GitHub PR comments, off the reconcile path."""

from __future__ import annotations

from meshpilot.gitops.notify.config import (
    CONFIGMAP_NAME,
    SECRET_NAME,
    GitHubService,
    NotificationConfig,
    NotificationConfigError,
    SlackService,
    Subscription,
    load_notifications_file,
    parse_notifications,
)
from meshpilot.gitops.notify.delivery import Delivery, Notifier, PullRequestIndex
from meshpilot.gitops.notify.events import (
    AppFacts,
    EventType,
    NotificationEvent,
    facts_of,
    transitions,
)
from meshpilot.gitops.notify.payloads import (
    GitHubComment,
    app_link,
    github_comment,
    repo_full_name,
    revision_link,
    slack_payload,
)
from meshpilot.gitops.notify.redact import MASK, Redactor, secret_values

__all__ = [
    "CONFIGMAP_NAME",
    "MASK",
    "SECRET_NAME",
    "AppFacts",
    "Delivery",
    "EventType",
    "GitHubComment",
    "GitHubService",
    "NotificationConfig",
    "NotificationConfigError",
    "NotificationEvent",
    "Notifier",
    "PullRequestIndex",
    "Redactor",
    "SlackService",
    "Subscription",
    "app_link",
    "facts_of",
    "github_comment",
    "load_notifications_file",
    "parse_notifications",
    "repo_full_name",
    "revision_link",
    "secret_values",
    "slack_payload",
    "transitions",
]
