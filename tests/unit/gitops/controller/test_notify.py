"""Notifications: payload shapes, delivery to a real local HTTP server, retries, and no
Secret value in anything sent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from meshpilot.gitops.model import HealthStatusCode, OperationPhase, SyncStatusCode
from meshpilot.gitops.notify import (
    AppFacts,
    EventType,
    NotificationConfigError,
    NotificationEvent,
    Notifier,
    Redactor,
    load_notifications_file,
    revision_link,
    secret_values,
    transitions,
)
from tests.unit.gitops.controller.env import Receiver

SHA = "4f2c9d0e1b2a3c4d5e6f708192a3b4c5d6e7f801"


def _facts(**changes: object) -> AppFacts:
    base = {
        "name": "shop",
        "namespace": "argocd",
        "project": "default",
        "repo_url": "git@github.com:acme/mesh.git",
        "sync_status": SyncStatusCode.SYNCED,
        "health_status": HealthStatusCode.HEALTHY,
        "revision": SHA,
    }
    base.update(changes)
    return AppFacts(**base)  # type: ignore[arg-type]


def _config(tmp: Path, receiver: Receiver, extra: str = "") -> Path:
    path = tmp / "notifications.yaml"
    path.write_text(
        f"""\
apiVersion: v1
kind: ConfigMap
metadata: {{name: argocd-notifications-cm, namespace: argocd}}
data:
  context: |
    argocdUrl: https://cd.example.com
    retries: 2
    timeoutSeconds: 2
  service.slack: |
    webhookURL: $slack-url
  service.github: |
    apiURL: {receiver.url}/github
    token: $github-token
{extra}---
apiVersion: v1
kind: Secret
metadata: {{name: argocd-notifications-secret, namespace: argocd}}
stringData:
  slack-url: {receiver.url}/slack/T000/B000/XXXXSECRETPATH
  github-token: ghp_notarealtoken123
"""
    )
    return path


def test_transitions_fire_once_per_change() -> None:
    synced = _facts()
    out = _facts(sync_status=SyncStatusCode.OUT_OF_SYNC)
    assert transitions(synced, out) == [EventType.OUT_OF_SYNC]
    assert transitions(out, out) == []
    running = _facts(operation_phase=OperationPhase.RUNNING, operation_started_at="t1")
    done = _facts(operation_phase=OperationPhase.SUCCEEDED, operation_started_at="t1")
    failed = _facts(operation_phase=OperationPhase.FAILED, operation_started_at="t2")
    assert transitions(synced, running) == [EventType.SYNC_RUNNING]
    assert transitions(running, done) == [EventType.SYNC_SUCCEEDED]
    assert transitions(done, failed) == [EventType.SYNC_FAILED]
    degraded = _facts(health_status=HealthStatusCode.DEGRADED)
    assert transitions(synced, degraded) == [EventType.HEALTH_DEGRADED]
    assert transitions(degraded, degraded) == []


def test_revision_links_for_github_like_urls() -> None:
    assert revision_link("git@github.com:acme/mesh.git", SHA) == (
        f"https://github.com/acme/mesh/commit/{SHA}"
    )
    assert revision_link("https://user:pw@gitlab.com/acme/mesh.git", "abc") == (
        "https://gitlab.com/acme/mesh/commit/abc"
    )
    assert revision_link("/srv/git/mesh", SHA) is None


def test_slack_and_github_payloads_arrive_without_secret_values(tmp_path: Path) -> None:
    receiver = Receiver()
    try:
        config = load_notifications_file(_config(tmp_path, receiver))
        secret = {"stringData": {"password": "hunter2-very-secret"}}
        notifier = Notifier(config, lambda: Redactor(secret_values([secret])))
        notifier.pull_requests.remember(SHA, 42)
        facts = _facts(
            operation_phase=OperationPhase.FAILED,
            operation_started_at="t1",
            operation_message="apply failed: password hunter2-very-secret rejected",
            operation_revision=SHA,
        )

        async def send() -> None:
            notifier.start()
            notifier.submit(NotificationEvent(EventType.SYNC_FAILED, facts, "2024-01-01T00:00:00Z"))
            await notifier.stop()

        asyncio.run(send())
    finally:
        receiver.close()
    everything = json.dumps(receiver.received)
    assert "hunter2-very-secret" not in everything
    assert "ghp_notarealtoken123" not in json.dumps([b for _, _, b in receiver.received])
    (slack,) = receiver.bodies("/slack/")
    assert slack["text"].startswith(":x: Sync failed: application shop failed to sync")
    attachment = slack["attachments"][0]
    assert attachment["title_link"] == "https://cd.example.com/applications/shop"
    fields = {f["title"]: f["value"] for f in attachment["fields"]}
    assert fields["Revision"] == f"<https://github.com/acme/mesh/commit/{SHA}|{SHA[:12]}>"
    assert "++++++++" in fields["Message"]
    assert slack["blocks"][0]["type"] == "section"
    ((path, headers, comment),) = [r for r in receiver.received if "/comments" in r[0]]
    assert path == "/github/repos/acme/mesh/issues/42/comments"
    assert headers["Authorization"] == "Bearer ghp_notarealtoken123"
    assert set(comment) == {"body"}
    assert "**Sync failed**" in comment["body"]
    assert f"https://github.com/acme/mesh/commit/{SHA}" in comment["body"]


def test_failed_delivery_is_retried_then_given_up(tmp_path: Path) -> None:
    receiver = Receiver()
    receiver.close()  # nothing listens there any more
    config = load_notifications_file(_config(tmp_path, receiver))
    notifier = Notifier(config)

    async def send() -> None:
        notifier.start()
        notifier.submit(NotificationEvent(EventType.OUT_OF_SYNC, _facts(), "t"))
        await notifier.stop(drain_timeout=10)

    asyncio.run(send())
    assert notifier.failed == 1 and notifier.sent == 0


def test_subscriptions_choose_services_and_bad_triggers_are_named(tmp_path: Path) -> None:
    receiver = Receiver()
    receiver.close()
    extra = "  subscriptions: |\n    - recipients: [slack]\n      triggers: [on-health-degraded]\n"
    config = load_notifications_file(_config(tmp_path, receiver, extra))
    assert config.recipients(EventType.HEALTH_DEGRADED) == ["slack"]
    assert config.recipients(EventType.SYNC_SUCCEEDED) == []
    bad = "  subscriptions: |\n    - recipients: [slack]\n      triggers: [on-sync-done]\n"
    with pytest.raises(NotificationConfigError, match="unknown trigger 'on-sync-done'"):
        load_notifications_file(_config(tmp_path, receiver, bad))
