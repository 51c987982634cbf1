"""Notification settings from an `argocd-notifications-cm`-like ConfigMap (in the store or a
YAML file), with `$name` references resolved from the `argocd-notifications-secret` Secret.

    apiVersion: v1
    kind: ConfigMap
    metadata: {name: argocd-notifications-cm, namespace: argocd}
    data:
      context: |
        argocdUrl: https://cd.example.com          # links: <argocdUrl>/applications/<app>
      service.slack: |
        webhookURL: $slack-webhook-url             # a Slack-compatible incoming webhook
      service.github: |
        apiURL: https://api.github.com             # GitHub REST (Enterprise: .../api/v3)
        token: $github-token
      subscriptions: |
        - recipients: [slack, github]
          triggers: [on-sync-succeeded, on-sync-failed]
      pullRequests: |                               # revision -> PR number (optional)
        4f2c...: 12

Without `subscriptions`, every trigger goes to every configured service, except that PR
comments are made for sync events only (argocd-commenter's behaviour).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshpilot.config.yaml_load import YAMLInputError, load_yaml, load_yaml_all
from meshpilot.gitops.errors import GitopsError
from meshpilot.gitops.notify.events import EventType

__all__ = [
    "CONFIGMAP_NAME",
    "SECRET_NAME",
    "GitHubService",
    "NotificationConfig",
    "NotificationConfigError",
    "SlackService",
    "Subscription",
    "load_notifications_file",
    "parse_notifications",
]

CONFIGMAP_NAME = "argocd-notifications-cm"
SECRET_NAME = "argocd-notifications-secret"
_SYNC_TRIGGERS = (EventType.SYNC_RUNNING, EventType.SYNC_SUCCEEDED, EventType.SYNC_FAILED)


class NotificationConfigError(GitopsError):
    """Notification settings that cannot be used; names the file or object and the key."""


@dataclass(frozen=True, slots=True)
class SlackService:
    webhook_url: str = field(repr=False)  # the URL is the credential of an incoming webhook


@dataclass(frozen=True, slots=True)
class GitHubService:
    api_url: str = "https://api.github.com"
    token: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class Subscription:
    recipients: tuple[str, ...]
    triggers: tuple[EventType, ...]


@dataclass(frozen=True, slots=True)
class NotificationConfig:
    base_url: str = ""
    slack: SlackService | None = None
    github: GitHubService | None = None
    subscriptions: tuple[Subscription, ...] = ()
    pull_requests: Mapping[str, int] = field(default_factory=dict)
    timeout: float = 10.0
    retries: int = 3

    @property
    def credentials(self) -> tuple[str, ...]:
        """Strings that must never appear in logs or payloads."""
        out = [
            self.slack.webhook_url if self.slack else "",
            self.github.token if self.github else "",
        ]
        return tuple(s for s in out if s)

    def recipients(self, event: EventType) -> list[str]:
        """Services (`slack`, `github`) that get `event`."""
        configured = [n for n, s in (("slack", self.slack), ("github", self.github)) if s]
        if not self.subscriptions:
            return [n for n in configured if n != "github" or event in _SYNC_TRIGGERS]
        out: list[str] = []
        for sub in self.subscriptions:
            if event in sub.triggers:
                out += [r for r in sub.recipients if r in configured and r not in out]
        return out


def parse_notifications(
    configmap: Mapping[str, Any], secret: Mapping[str, Any] | None = None, origin: str = ""
) -> NotificationConfig:
    """The settings a ConfigMap (and its Secret, for `$name` references) describe."""
    where = origin or f"ConfigMap {CONFIGMAP_NAME}"
    data = configmap.get("data") or {}
    if not isinstance(data, Mapping):
        raise NotificationConfigError(f"{where}: data must be a mapping")
    secrets = _secret_values(secret or {}, where)

    def block(key: str) -> dict[str, Any]:
        text = data.get(key)
        if text is None:
            return {}
        try:
            value = load_yaml(text, f"data.{key}") if isinstance(text, str) else text
        except YAMLInputError as exc:
            raise NotificationConfigError(f"{where}: {exc}") from None
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise NotificationConfigError(f"{where}: data.{key}: expected a mapping")
        return value

    def ref(key: str, field_name: str, value: Any) -> str:
        text = str(value or "")
        if text.startswith("$"):
            name = text[1:]
            if name not in secrets:
                raise NotificationConfigError(
                    f"{where}: data.{key}.{field_name}: {SECRET_NAME} has no key {name!r}"
                )
            return secrets[name]
        return text

    context = block("context")
    slack_block, github_block = block("service.slack"), block("service.github")
    slack = None
    if slack_block:
        url = ref("service.slack", "webhookURL", slack_block.get("webhookURL"))
        if not url:
            raise NotificationConfigError(f"{where}: data.service.slack.webhookURL is required")
        slack = SlackService(url)
    github = None
    if github_block:
        api = str(github_block.get("apiURL") or "https://api.github.com").rstrip("/")
        github = GitHubService(api, ref("service.github", "token", github_block.get("token")))
    return NotificationConfig(
        base_url=str(context.get("argocdUrl") or "").rstrip("/"),
        slack=slack,
        github=github,
        subscriptions=_subscriptions(data.get("subscriptions"), where),
        pull_requests=_pull_requests(block("pullRequests"), where),
        timeout=float(context.get("timeoutSeconds") or 10.0),
        retries=int(str(context.get("retries", 3))),
    )


def load_notifications_file(path: str | Path) -> NotificationConfig:
    """A YAML file with the ConfigMap (and optionally the Secret) as documents."""
    file = Path(path)
    try:
        docs = [d for d in load_yaml_all(file.read_text(encoding="utf-8"), str(file)) if d]
    except OSError as exc:
        raise NotificationConfigError(f"{file}: cannot read: {exc.strerror}") from None
    except YAMLInputError as exc:
        raise NotificationConfigError(str(exc)) from None
    configmaps = [d for d in docs if isinstance(d, dict) and d.get("kind") == "ConfigMap"]
    secrets = [d for d in docs if isinstance(d, dict) and d.get("kind") == "Secret"]
    if not configmaps:
        raise NotificationConfigError(f"{file}: no ConfigMap {CONFIGMAP_NAME} in the file")
    return parse_notifications(configmaps[0], secrets[0] if secrets else None, str(file))


def _secret_values(secret: Mapping[str, Any], where: str) -> dict[str, str]:
    out = {str(k): str(v) for k, v in (secret.get("stringData") or {}).items()}
    for key, value in (secret.get("data") or {}).items():
        try:
            out.setdefault(str(key), base64.b64decode(str(value), validate=True).decode())
        except (binascii.Error, UnicodeDecodeError):
            raise NotificationConfigError(
                f"{where}: {SECRET_NAME} data.{key} is not base64"
            ) from None
    return out


def _subscriptions(text: Any, where: str) -> tuple[Subscription, ...]:
    if text is None:
        return ()
    try:
        items = load_yaml(text, "data.subscriptions") if isinstance(text, str) else text
    except YAMLInputError as exc:
        raise NotificationConfigError(f"{where}: {exc}") from None
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise NotificationConfigError(f"{where}: data.subscriptions: expected a list")
    out = []
    known = {e.value for e in EventType}
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise NotificationConfigError(f"{where}: data.subscriptions[{i}]: expected a mapping")
        triggers = [str(t) for t in item.get("triggers") or list(known)]
        bad = [t for t in triggers if t not in known]
        if bad:
            raise NotificationConfigError(
                f"{where}: data.subscriptions[{i}].triggers: unknown trigger {bad[0]!r} "
                f"(known: {', '.join(sorted(known))})"
            )
        recipients = tuple(str(r).partition(":")[0] for r in item.get("recipients") or ())
        out.append(Subscription(recipients, tuple(EventType(t) for t in triggers)))
    return tuple(out)


def _pull_requests(block: Mapping[str, Any], where: str) -> dict[str, int]:
    out = {}
    for revision, number in block.items():
        try:
            out[str(revision)] = int(number)
        except (TypeError, ValueError):
            raise NotificationConfigError(
                f"{where}: data.pullRequests.{revision}: not a PR number: {number!r}"
            ) from None
    return out
