"""What the controller keeps per Application between reconciles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from meshpilot.config.keys import ConfigKey
from meshpilot.gitops.controller.push import path_filter
from meshpilot.gitops.controller.reconcile import ReconcileResult
from meshpilot.gitops.model import Application
from meshpilot.gitops.repo.urls import normalize_url

__all__ = ["AppRecord", "Source"]


@dataclass(slots=True)
class AppRecord:
    app: Application
    owned: frozenset[ConfigKey] = frozenset()
    next_due: float = 0.0
    last: ReconcileResult | None = None
    _sources: tuple[Application | None, tuple[Source, ...]] = (None, ())

    def sources(self) -> tuple[Source, ...]:
        """The app's sources as a push asks about them (computed once per app version)."""
        if self._sources[0] is not self.app:
            found = tuple(
                Source(normalize_url(s.repo_url), s.target_revision, path_filter(self.app, s.path))
                for s in self.app.spec.all_sources
            )
            self._sources = (self.app, found)
        return self._sources[1]


class Source(NamedTuple):
    url: str  # normalized
    target: str
    paths: tuple[str, ...] | None  # manifest-generate-paths from the repository root
