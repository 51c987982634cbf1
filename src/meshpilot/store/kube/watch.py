"""Following a Kubernetes store: per kind, a watch from the resourceVersion its list (or
the last event or bookmark) left, with bookmarks asked for so that a quiet kind's version
stays recent. A dropped stream is resumed from that version; one the server no longer has
(410 Gone, "Expired") makes that kind be listed again. Each watch runs in its own thread
(the client's streams block); what it reads is taken in on the watching event loop, in
order, so handlers run there.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any

from meshpilot.store.kube.client import KubeApiError, WatchStream
from meshpilot.store.kube.codec import item_key
from meshpilot.store.kube.kinds import ApiResource
from meshpilot.store.kube.target import KubeError

if TYPE_CHECKING:
    from meshpilot.store.kube.backend import KubeStore

__all__ = ["KindWatch", "follow"]

log = logging.getLogger(__name__)
_RETRY_MIN, _RETRY_MAX = 0.1, 2.0  # seconds between reconnection attempts (doubling)
_TIMEOUT = 300  # a watch's timeoutSeconds: the server ends it then, and it is resumed


async def follow(store: KubeStore) -> None:
    """Take in every change of every kind the server serves until cancelled."""
    if not store.loaded:
        await asyncio.to_thread(store.load)
    loop = asyncio.get_running_loop()
    watches = [
        KindWatch(store, resource, loop)
        for resource in store.resources
        if resource.kind not in store.absent
    ]
    for watch in watches:
        watch.start()
    try:
        await asyncio.Event().wait()
    finally:
        for watch in watches:
            watch.stop()


class KindWatch:
    """One kind's list + watch loop, in a daemon thread."""

    def __init__(self, store: KubeStore, resource: ApiResource, loop: Any) -> None:
        self.store, self.resource, self.loop = store, resource, loop
        self.version = store.versions.get(resource.kind, "")
        self._stopped = threading.Event()
        self._stream: WatchStream | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"kube-watch-{resource.plural}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        stream = self._stream
        if stream is not None:
            stream.interrupt()

    def _run(self) -> None:
        delay = _RETRY_MIN
        while not self._stopped.is_set():
            try:
                if self._watch_once():
                    log.warning(
                        "%s: %s resourceVersion %s expired (410); listing them again",
                        self.store, self.resource.plural, self.version,
                    )  # fmt: skip
                    self._relist()
                delay = _RETRY_MIN
            except (KubeError, OSError, ValueError) as exc:
                if self._stopped.is_set():
                    return
                log.warning(
                    "%s: watch of %s from resourceVersion %s lost (%s); resuming in %.1fs",
                    self.store, self.resource.plural, self.version, exc, delay,
                )  # fmt: skip
                self._stopped.wait(delay)
                delay = min(delay * 2, _RETRY_MAX)
            except Exception as exc:  # the stream closed under us by stop(), or worse
                if self._stopped.is_set():
                    return
                log.warning("%s: watch of %s failed: %r", self.store, self.resource.plural, exc)
                self._stopped.wait(_RETRY_MAX)

    def _watch_once(self) -> bool:
        """One watch stream; True when its resourceVersion has expired (410 Gone)."""
        try:
            stream = self.store.client.watch(self.resource.collection(), self.version, _TIMEOUT)
        except KubeApiError as exc:
            if exc.status == 410:
                return True
            raise
        self._stream = stream
        try:
            for event in stream.events():
                if self._stopped.is_set():
                    return False
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        return True
                    raise KubeError(f"watch error: {obj.get('message') or obj}")
                version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._post(kind, obj)
                if version:
                    self.version = version  # BOOKMARK: only this
            return False  # the server ended the watch (timeoutSeconds): resume
        finally:
            self._stream = None
            stream.close()

    def _relist(self) -> None:
        listing = self.store.list_kind(self.resource)
        if listing is None:
            raise KubeError(f"{self.resource.plural} are no longer served")
        self.version = listing[2]
        self.loop.call_soon_threadsafe(self._take_listing, listing)

    def _take_listing(self, listing: Any) -> None:
        with self.store.lock:
            self.store.take_listings([listing])

    def _post(self, kind: str, obj: dict[str, Any]) -> None:
        self.loop.call_soon_threadsafe(self._take_event, kind, obj)

    def _take_event(self, kind: str, obj: dict[str, Any]) -> None:
        with self.store.lock:
            if kind == "DELETED":
                self.store.take_in((), [item_key(self.resource, obj)])
            else:
                self.store.take_in([(self.resource, obj)], ())
