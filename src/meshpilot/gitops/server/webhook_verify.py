"""Who may call `POST /api/webhook`: the shared secrets of argocd-secret, checked as Argo CD
checks them, per provider (the provider is told by its event header):

    GitHub            X-Hub-Signature-256: sha256=HMAC(body, webhook.github.secret)
    GitLab            X-Gitlab-Token equal to webhook.gitlab.secret
    Bitbucket Cloud   X-Hook-UUID equal to webhook.bitbucket.uuid
    Bitbucket Server  X-Hub-Signature: sha256=HMAC(body, webhook.bitbucketserver.secret)

A provider without a configured secret is accepted unverified (a webhook only triggers a
refresh, as Argo CD argues); with one, a request that lacks it or carries a wrong one is
refused with 401. Comparisons are constant-time; secrets never reach a message.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from meshpilot.gitops.errors import GitopsError

__all__ = ["Provider", "WebhookError", "WebhookSecrets", "provider_of", "verify_webhook"]


class WebhookError(GitopsError):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Provider(StrEnum):
    GITHUB = "GitHub"
    GITLAB = "GitLab"
    BITBUCKET = "Bitbucket"
    BITBUCKET_SERVER = "Bitbucket Server"


@dataclass(frozen=True, slots=True)
class WebhookSecrets:
    github: str = field(default="", repr=False)
    gitlab: str = field(default="", repr=False)
    bitbucket_uuid: str = field(default="", repr=False)
    bitbucket_server: str = field(default="", repr=False)


def provider_of(headers: Mapping[str, str]) -> Provider | None:
    """Headers have lower-case names. Bitbucket Cloud's event keys are `repo:push` and
    `pullrequest:*` and it sends X-Hook-UUID; other X-Event-Keys are Bitbucket Server's."""
    if "x-github-event" in headers:
        return Provider.GITHUB
    if "x-gitlab-event" in headers:
        return Provider.GITLAB
    key = headers.get("x-event-key", "")
    if "x-hook-uuid" in headers or key == "repo:push" or key.startswith("pullrequest:"):
        return Provider.BITBUCKET
    if key:
        return Provider.BITBUCKET_SERVER
    return None


def _equal(given: str, wanted: str) -> bool:
    return hmac.compare_digest(given.encode(), wanted.encode())


def _signature(header: str, headers: Mapping[str, str], body: bytes, secret: str) -> None:
    given = headers.get(header.lower(), "")
    wanted = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not given:
        raise WebhookError(f"HMAC verification failed: no {header} header", 401)
    if not _equal(given, wanted):
        raise WebhookError("HMAC verification failed", 401)


def verify_webhook(
    provider: Provider | None, headers: Mapping[str, str], body: bytes, secrets: WebhookSecrets
) -> None:
    """Raise WebhookError(401) when the provider's secret is set and not proven."""
    if provider is Provider.GITHUB and secrets.github:
        _signature("X-Hub-Signature-256", headers, body, secrets.github)
    elif provider is Provider.GITLAB and secrets.gitlab:
        if not _equal(headers.get("x-gitlab-token", ""), secrets.gitlab):
            raise WebhookError("GitLab webhook token mismatch", 401)
    elif provider is Provider.BITBUCKET and secrets.bitbucket_uuid:
        if not _equal(headers.get("x-hook-uuid", ""), secrets.bitbucket_uuid):
            raise WebhookError("Bitbucket webhook UUID verification failed", 401)
    elif provider is Provider.BITBUCKET_SERVER and secrets.bitbucket_server:
        _signature("X-Hub-Signature", headers, body, secrets.bitbucket_server)
