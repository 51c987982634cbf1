"""The application controller: the only impure loop of GitOps (gitops-engine `engine`).

It reconciles every Application in the store:
- on the resync interval (Argo CD's `timeout.reconciliation` / `--app-resync`, 180 s by
  default), resolving each branch once per pass for all its apps; an app whose inputs
  did not change since its last quiet comparison is not compared again (reconcile.py);
- at once when a push webhook names the app's repo and branch;
- at once when the store reports a change of an object the app owns (drift; not the
  echo of the controller's own sync, which the event names): the store's change event
  maps to the owning app through the last comparison and the tracking annotation (by
  name, owners.py), and the app is compared against the revision it already knows (no git),
  its status written before the mesh analysis of the whole store, whose verdict follows;
- when the Application's spec or its AppProject changes.
A reconcile runs in a worker thread (git, rendering and comparison block), one per app at
a time; one worker takes only urgent work (drift, webhooks, requests). Notifications are
never awaited; heap.py keeps long-lived objects out of full collections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.gitops.controller.heap import keep_heap_settled
from meshpilot.gitops.controller.leadership import LeadershipState
from meshpilot.gitops.controller.metrics import AppInfo, Metrics
from meshpilot.gitops.controller.owners import OwnerIndex, apps_tracked_as
from meshpilot.gitops.controller.push import PushEvent, paths_concern, revision_matches
from meshpilot.gitops.controller.queue import Level, WorkQueue
from meshpilot.gitops.controller.reconcile import Reconciler, ReconcileResult
from meshpilot.gitops.controller.records import AppRecord
from meshpilot.gitops.controller.revisions import CachingRepoService
from meshpilot.gitops.controller.schedule import DueHeap
from meshpilot.gitops.controller.view import StoreView
from meshpilot.gitops.diff.memo import PairMemo
from meshpilot.gitops.diff.tracking import TRACKING_ANNOTATION, parse_tracking_id
from meshpilot.gitops.model import Application
from meshpilot.gitops.notify.delivery import Notifier
from meshpilot.gitops.projects import CONTROL_NAMESPACE
from meshpilot.gitops.refresh import RefreshDeps
from meshpilot.gitops.render import Renderer
from meshpilot.gitops.repo.urls import normalize_url
from meshpilot.gitops.source import ChartDetector
from meshpilot.store.base import ChangeEvent
from meshpilot.store.base import WatchedStore as FollowingStore
from meshpilot.supervise import TaskSupervisor

__all__ = ["Controller", "ControllerSettings", "PushEvent", "WatchedStore"]

log = logging.getLogger(__name__)


class WatchedStore(FollowingStore, Protocol):
    """A live store that follows other processes' writes, with a directory for the
    controller's locks (the directory store's root)."""

    root: Path


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    app_resync: float = 180.0  # seconds between reconciles of an unchanged app
    self_heal_timeout: float = 5.0  # Argo CD's --self-heal-timeout-seconds
    workers: int = 2  # reconciles in flight (Argo CD's status processors), plus one
    # that takes only urgent work (drift, webhooks, requests), never a resync
    control_namespace: str = CONTROL_NAMESPACE


@dataclass(slots=True)
class _Waiter:
    since: float
    future: asyncio.Future[ReconcileResult] = field(repr=False)


class Controller:
    def __init__(
        self,
        store: FollowingStore,
        renderer: Renderer,
        settings: ControllerSettings | None = None,
        notifier: Notifier | None = None,
        has_chart: ChartDetector | None = None,
        lock_dir: Path | None = None,
    ) -> None:
        """`lock_dir`: where operations lock their app, by default beside a directory
        store; on etcd only the leader syncs, so a directory of its own will do."""
        self.store = store
        self.settings = settings or ControllerSettings()
        self.view = StoreView(store)
        self.renderer = renderer
        self.notifier = notifier
        self.deps = RefreshDeps(
            store=self.view,
            renderer=renderer,
            has_chart=has_chart,
            control_namespace=self.settings.control_namespace,
            assess_mesh=False,  # findings come once per store version from the view
            pairs=PairMemo(),
        )
        self.stopping = threading.Event()
        if lock_dir is None:
            root = getattr(store, "root", None)
            if root is None:
                raise ValueError(f"{store!r}: the controller needs a lock directory")
            lock_dir = Path(root) / ".gitops" / "locks"
        self.leadership = LeadershipState()
        self.reconciler = Reconciler(
            self.view, self.deps, self.settings.self_heal_timeout, lock_dir, self.stopping
        )
        self.metrics = Metrics()
        self.queue = WorkQueue()
        self.apps: dict[ConfigKey, AppRecord] = {}
        self._owners = OwnerIndex()  # resource → apps
        self._waiters: dict[ConfigKey, list[_Waiter]] = {}
        self._started: dict[ConfigKey, float] = {}
        self._listeners: list[Callable[[ReconcileResult], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._due = DueHeap()  # resyncs by due time
        self._stop = asyncio.Event()
        self.ready = asyncio.Event()
        # The loops below (and the notifier's, from `gitops serve`): a failed one is logged,
        # counted, shown on /healthz and /debug/tasks, and restarted (meshpilot/supervise.py).
        self.tasks = TaskSupervisor("gitops")

    # -- public --------------------------------------------------------------------------

    def on_result(self, listener: Callable[[ReconcileResult], None]) -> None:
        """Call `listener` (on the event loop) after every reconcile (tests, benchmarks)."""
        self._listeners.append(listener)

    async def run(self) -> None:
        """Reconcile until `stop()`."""
        self._loop = asyncio.get_running_loop()
        self.store.subscribe(self._on_store_change)
        await asyncio.to_thread(self.store.refresh)
        self._scan()
        start = self.tasks.start
        tasks = [
            start("store-watch", self.store.watch),
            start("resync", self._schedule),
            *(start(f"reconcile-{i}", self._work) for i in range(max(self.settings.workers, 1))),
            start("reconcile-urgent", lambda: self._work(urgent_only=True)),
            start("heap", lambda: keep_heap_settled(self.queue.urgent_running)),
        ]
        self.ready.set()
        try:
            await self._stop.wait()
        finally:
            self.stopping.set()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self.queue.close()

    def stop(self) -> None:
        self._stop.set()

    def request(self, key: ConfigKey, level: Level = Level.LATEST, reason: str = "request") -> None:
        if level is Level.LATEST:
            self.expire(key)
        self.queue.add(key, level, reason)

    async def refresh(self, key: ConfigKey, level: Level = Level.LATEST) -> ReconcileResult:
        """Reconcile `key` now (after any reconcile already running) and return the result."""
        assert self._loop is not None
        waiter = _Waiter(time.monotonic(), self._loop.create_future())
        self._waiters.setdefault(key, []).append(waiter)
        self.request(key, level, "refresh requested")
        return await waiter.future

    def webhook(self, push: PushEvent) -> list[ConfigKey]:
        """Reconcile the apps whose source the push changed; returns their keys."""
        urls = {normalize_url(u) for u in push.repo_urls if u}
        if isinstance(self.renderer.repos, CachingRepoService):
            self.renderer.repos.expire(urls)
        matched = []
        for key, record in self.apps.items():
            for src in record.sources():
                concerned = src.url in urls and revision_matches(src.target, push)
                if concerned and paths_concern(src.paths, push):
                    matched.append(key)
                    break
        matched.sort()
        for key in matched:
            self.queue.add(key, Level.LATEST, "webhook")
        return matched

    def app_infos(self) -> list[AppInfo]:
        out = []
        for key, record in self.apps.items():
            app = record.app
            obj = self.store.get(key)
            if obj is not None and isinstance(obj.model, Application):
                app = obj.model
            sources = app.spec.all_sources
            policy = app.spec.sync_policy
            out.append(
                AppInfo(
                    name=key.name,
                    namespace=key.namespace,
                    project=app.spec.project_name,
                    repo=sources[0].repo_url if sources else "",
                    dest_server=app.spec.destination.server or app.spec.destination.name,
                    dest_namespace=app.spec.destination.namespace,
                    sync_status=str(app.status.sync.status),
                    health_status=str(app.status.health.status),
                    autosync_enabled=bool(policy and policy.is_automated),
                )
            )
        return out

    # -- store events --------------------------------------------------------------------

    def _on_store_change(self, event: ChangeEvent) -> None:
        """Called by the store in whatever thread refreshed it."""
        loop = self._loop
        if loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._route(event)
        else:
            loop.call_soon_threadsafe(self._route, event)

    def _route(self, event: ChangeEvent) -> None:
        self.view.forget(event.keys)
        for key in sorted(event.keys):
            if key.kind is Kind.APPLICATION:
                self._app_changed(key)
            elif key.kind is Kind.APP_PROJECT:
                for app_key, record in self.apps.items():
                    if record.app.spec.project_name == key.name:
                        self.queue.add(app_key, Level.RECENT, "project changed")
            elif key not in event.written_here:  # not our own sync's echo
                for app_key in self._owners_of(key):
                    self.queue.add(app_key, Level.RECENT, "drift")

    def _owners_of(self, key: ConfigKey) -> set[ConfigKey]:
        owners = self._owners.of(key)
        manifest = self.view.manifest(key)
        annotations = ((manifest or {}).get("metadata") or {}).get("annotations") or {}
        parsed = parse_tracking_id(str(annotations.get(TRACKING_ANNOTATION) or ""))
        if parsed is not None:
            ns = self.settings.control_namespace
            owners.update(apps_tracked_as(parsed.app, ns, self._app_of))
        return owners

    def _app_of(self, key: ConfigKey) -> Application | None:
        record = self.apps.get(key)
        return record.app if record is not None else None

    def _app_changed(self, key: ConfigKey) -> None:
        obj = self.store.get(key)
        record = self.apps.get(key)
        if obj is None or not isinstance(obj.model, Application):
            if record is not None:
                self._drop(key)
            return
        app = obj.model
        if record is None:
            self.apps[key] = AppRecord(app)
            self.queue.add(key, Level.LATEST, "application added")
            return
        changed = (app.spec, app.operation, app.metadata.annotations) != (
            record.app.spec,
            record.app.operation,
            record.app.metadata.annotations,
        )
        record.app = app
        if changed:  # a status write (ours) is not a reason to look again
            self.request(key, Level.LATEST, "application changed")

    def _drop(self, key: ConfigKey) -> None:
        record = self.apps.pop(key)
        self.queue.forget(key)
        self._owners.update(key, record.owned, frozenset())

    def _scan(self) -> None:
        for obj in self.store.snapshot().of_kind(Kind.APPLICATION):
            if isinstance(obj.model, Application) and obj.key not in self.apps:
                self.apps[obj.key] = AppRecord(obj.model)
                self.queue.add(obj.key, Level.LATEST, "start", urgent=False)

    def expire(self, key: ConfigKey) -> None:
        """Forget the resolved revisions of the app's repos (the next look asks git)."""
        record = self.apps.get(key)
        repos = self.renderer.repos
        if record is not None and isinstance(repos, CachingRepoService):
            repos.expire(s.repo_url for s in record.app.spec.all_sources)

    # -- resync --------------------------------------------------------------------------

    async def _schedule(self) -> None:
        """Queue due resyncs a slice at a time (a few per worker), so drift and webhook work
        never waits behind a whole round; the end of a reconcile wakes this for the next."""
        interval = self.settings.app_resync
        # Not `while True`: Python 3.11's wait_for can swallow a cancellation that arrives
        # as _wake is set, and run() would then wait for this task forever on shutdown.
        while not self.stopping.is_set():
            now = time.monotonic()
            room = max(2 * max(self.settings.workers, 1) - len(self.queue), 0)
            due = self._due.take(now, room, self._next_due)
            if due:
                repos = self.renderer.repos
                if isinstance(repos, CachingRepoService):
                    # One resolution per repo per pass: one made after these apps were last
                    # reconciled is fresh enough (the first app of a pass asks git again).
                    since = due[0][0] - interval
                    urls = {s.repo_url for _, k in due for s in self.apps[k].app.spec.all_sources}
                    repos.expire(urls, before=since)
                for _, key in due:
                    self.apps[key].next_due = 0.0  # set again when the reconcile ends
                    self.queue.add(key, Level.LATEST, "resync", urgent=False)
            head = self._due.head() or now + interval
            delay = head - time.monotonic()
            if head <= now:
                delay = interval  # the rest when a reconcile ends (it sets _wake)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(min(delay, interval), 0.01))

    def _next_due(self, key: ConfigKey) -> float | None:
        return record.next_due if (record := self.apps.get(key)) is not None else None

    # -- workers -------------------------------------------------------------------------

    async def _work(self, urgent_only: bool = False) -> None:
        while True:
            item = await self.queue.get(urgent_only=urgent_only)
            self._started[item.key] = time.monotonic()
            try:
                fresh = item.reason not in _REPORT_FIRST
                pause = None if item.urgent else self.queue.wait_calm
                result = await asyncio.to_thread(self.reconciler.reconcile, item.key, fresh, pause)
            except Exception as exc:  # one app's failure must not stop the controller
                log.exception("reconcile of %s failed", item.key)
                result = ReconcileResult(item.key, exists=True, errors=(str(exc),))
            finally:
                self.queue.done(item.key)
            self._finish(result)

    def _finish(self, result: ReconcileResult) -> None:
        key = result.key
        self.metrics.observe_reconcile(result.seconds)
        record = self.apps.get(key)
        if not result.exists:
            if record is not None:
                self._drop(key)
        elif record is not None:
            self._owners.update(key, record.owned, result.owned)
            record.owned = result.owned
            record.last = result
            record.next_due = time.monotonic() + self.settings.app_resync
            self._due.push(record.next_due, key)
            self._wake.set()
            if result.outcome is not None:
                project = record.app.spec.project_name
                phase = str(result.outcome.phase)
                self.metrics.count_sync(key.namespace, key.name, project, phase)
            if result.wait is not None:
                self.queue.add_after(result.wait, key, Level.RECENT, "self-heal")
            if result.stale_health:  # health again, with the findings of the new store
                self.queue.add(key, Level.RECENT, "mesh findings", urgent=False)
        if self.notifier is not None:
            for event in result.events:
                self.notifier.submit(event)
        started = self._started.pop(key, time.monotonic())
        waiters = self._waiters.get(key, [])
        for waiter in [w for w in waiters if w.since <= started]:
            waiters.remove(waiter)
            if not waiter.future.done():
                waiter.future.set_result(result)
        for listener in self._listeners:
            listener(result)


# Status first, the analysis of the store's mesh in a follow-up; a refresh request waits.
_REPORT_FIRST = frozenset(
    {"drift", "webhook", "resync", "self-heal", "start", "application added", "project changed"}
)
