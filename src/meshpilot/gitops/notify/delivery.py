"""Delivery of notifications off the reconcile path: the controller `submit`s events (never
waits); one worker task posts them with a timeout and retries with backoff. Failures are
logged with the host only: an incoming-webhook URL and an API token are credentials."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from meshpilot.gitops.notify.config import NotificationConfig
from meshpilot.gitops.notify.events import NotificationEvent
from meshpilot.gitops.notify.payloads import github_comment, slack_payload
from meshpilot.gitops.notify.redact import Redactor
from meshpilot.supervise import TaskSupervisor

__all__ = ["Delivery", "Notifier", "PullRequestIndex"]

log = logging.getLogger(__name__)

_QUEUE_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class Delivery:
    """One HTTP POST to make."""

    service: str
    url: str = field(repr=False)
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def where(self) -> str:
        """The target without credentials (for logs)."""
        parts = urlsplit(self.url)
        return f"{self.service} at {parts.hostname or '?'}"


class PullRequestIndex:
    """Revision → PR number, learnt from webhook payloads and the configured mapping."""

    def __init__(self) -> None:
        self._by_revision: dict[str, int] = {}

    def remember(self, revision: str, number: int) -> None:
        if revision:
            self._by_revision[revision] = number

    def lookup(self, revision: str, configured: dict[str, int] | None = None) -> int | None:
        for table in (self._by_revision, configured or {}):
            for rev, number in table.items():
                if revision and (rev == revision or (len(rev) >= 7 and revision.startswith(rev))):
                    return number
        return None


class Notifier:
    """Queue + worker. `redactor` is called per delivery so it sees the current Secrets."""

    def __init__(
        self,
        config: NotificationConfig,
        redactor: Callable[[], Redactor] = Redactor,
        pull_requests: PullRequestIndex | None = None,
    ) -> None:
        self.config = config
        self.redactor = redactor
        self.pull_requests = pull_requests or PullRequestIndex()
        self._queue: asyncio.Queue[NotificationEvent] | None = None
        self._task: asyncio.Task[None] | None = None
        self.sent = 0
        self.failed = 0

    @property
    def enabled(self) -> bool:
        return self.config.slack is not None or self.config.github is not None

    def start(self, tasks: TaskSupervisor | None = None) -> None:
        """Start delivering; under `tasks` (gitops serve's) a failed worker is restarted."""
        self._queue = asyncio.Queue(_QUEUE_LIMIT)
        if tasks is not None:
            self._task = tasks.start("notifier", self._run)
        else:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="notifier")

    async def stop(self, drain_timeout: float = 5.0) -> None:
        """Send what is queued (up to `drain_timeout`), then stop."""
        if self._task is None or self._queue is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), drain_timeout)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    def submit(self, event: NotificationEvent) -> None:
        """Queue `event`; never blocks (a full queue drops it with a warning)."""
        if self._queue is None or not self.enabled:
            return
        if event.pull_request is None:
            number = self.pull_requests.lookup(event.revision, dict(self.config.pull_requests))
            if number is not None:
                event = _with_pr(event, number)
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            log.warning("notification queue full: %s for %s dropped", event.type, event.app.name)

    def deliveries(self, event: NotificationEvent) -> list[Delivery]:
        """The POSTs `event` makes under the configuration (pure; tests call it too)."""
        out = []
        cfg = self.config
        for service in cfg.recipients(event.type):
            if service == "slack" and cfg.slack is not None:
                out.append(
                    Delivery("slack", cfg.slack.webhook_url, slack_payload(event, cfg.base_url))
                )
            elif service == "github" and cfg.github is not None:
                comment = github_comment(event, cfg.base_url)
                if comment is None:
                    continue
                headers = {
                    "Accept": "application/vnd.github+json",
                    "X-GitHub-Api-Version": "2022-11-28",
                }
                if cfg.github.token:
                    headers["Authorization"] = f"Bearer {cfg.github.token}"
                url = cfg.github.api_url + comment.path
                out.append(Delivery("github", url, comment.payload, headers))
        return out

    async def _run(self) -> None:
        assert self._queue is not None
        while True:
            event = await self._queue.get()
            try:
                redactor = self._redactor()
                for delivery in self.deliveries(event):
                    body = redactor.payload(delivery.body)
                    await self._post(
                        Delivery(delivery.service, delivery.url, body, delivery.headers)
                    )
            except Exception:  # a notifier must never stop the worker
                log.exception("notification %s for %s failed", event.type, event.app.name)
            finally:
                self._queue.task_done()

    def _redactor(self) -> Redactor:
        base = self.redactor()
        return Redactor([*base.values, *self.config.credentials])

    async def _post(self, delivery: Delivery) -> None:
        delay = 0.5
        for attempt in range(self.config.retries + 1):
            error = await asyncio.to_thread(_post_json, delivery, self.config.timeout)
            if error is None:
                self.sent += 1
                return
            if attempt < self.config.retries:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
        self.failed += 1
        log.warning("notification to %s failed: %s", delivery.where, error)


def _post_json(delivery: Delivery, timeout: float) -> str | None:
    """POST; None on a 2xx answer, else a short reason without the URL."""
    data = json.dumps(delivery.body).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "meshpilot-notifications"}
    request = urllib.request.Request(
        delivery.url, data, {**headers, **delivery.headers}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
            return None
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"{type(reason).__name__}: {getattr(reason, 'strerror', None) or 'unreachable'}"


def _with_pr(event: NotificationEvent, number: int) -> NotificationEvent:
    return NotificationEvent(event.type, event.app, event.time, number)
