"""Revision resolution with a memory, so an idle reconcile costs no git process.

Argo CD's refresh levels: a drift or status refresh compares against the revision already
resolved (CompareWithRecent); the periodic resync and a webhook resolve the branch again
(CompareWithLatest). Here `resolve` answers from the memory when it can; the controller
`expire`s a repository's entries when the newest commit is wanted (resync due, push
webhook, a CLI refresh), so the first app of a batch asks git and the others reuse it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from meshpilot.gitops.repo.credentials import RepoCredential
from meshpilot.gitops.repo.fetch import RepoService
from meshpilot.gitops.repo.trust import RepoTrust
from meshpilot.gitops.repo.urls import normalize_url

__all__ = ["CachingRepoService"]


class CachingRepoService(RepoService):
    def __init__(
        self,
        cache_root: Path,
        credentials: Sequence[RepoCredential] = (),
        timeout: float = 120.0,
        base_env: Mapping[str, str] | None = None,
        trust: RepoTrust | None = None,
    ) -> None:
        super().__init__(cache_root, credentials, timeout, base_env, trust)
        self._resolved: dict[tuple[str, str], tuple[str, float]] = {}
        self._memo_lock = threading.Lock()
        self._flights: dict[tuple[str, str], threading.Lock] = {}
        self._expired: dict[str, float] = {}  # URL → last expiry "now" (not a resync's)
        self._expired_all = 0.0
        self.git_resolves = 0  # resolutions that asked git (for tests and the benchmark)

    def resolve(self, url: str, revision: str) -> str:
        key = (normalize_url(url), revision.strip() or "HEAD")
        with self._memo_lock:
            hit = self._resolved.get(key)
            flight = self._flights.setdefault(key, threading.Lock())
        if hit is not None:
            return hit[0]
        with flight:  # one git resolution per key at a time; the others wait and reuse it
            with self._memo_lock:
                hit = self._resolved.get(key)
            if hit is not None:
                return hit[0]
            started = time.monotonic()
            commit = super().resolve(url, revision)
            with self._memo_lock:
                self.git_resolves += 1
                # an expiry while git ran (a push webhook) may postdate what git saw
                if started > max(self._expired.get(key[0], 0.0), self._expired_all):
                    self._resolved[key] = (commit, started)
        return commit

    def expire(self, urls: Iterable[str] | None = None, before: float | None = None) -> None:
        """Forget resolutions of `urls` (None: all) made before `before` (None: any time)."""
        wanted = None if urls is None else {normalize_url(u) for u in urls}
        limit = time.monotonic() if before is None else before
        with self._memo_lock:
            if before is None:
                stamp = time.monotonic()
                if wanted is None:
                    self._expired_all = stamp
                for url in wanted or ():
                    self._expired[url] = stamp
            for key, (_, at) in list(self._resolved.items()):
                if (wanted is None or key[0] in wanted) and at <= limit:
                    del self._resolved[key]

    def known(self, url: str, revision: str) -> str | None:
        with self._memo_lock:
            hit = self._resolved.get((normalize_url(url), revision.strip() or "HEAD"))
        return hit[0] if hit else None
