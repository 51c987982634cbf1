"""Discovery logs a warning for every field it parses and ignores (analysis/unsupported_fields.py).

Each occurrence is logged once: when its object (or the mesh settings) is first read or
changes, not again on every push.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from meshpilot.analysis.unsupported_fields import mesh_diagnostics, object_diagnostics
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.kinds import Kind
from meshpilot.store.base import MESH_KEY, ChangeEvent, ChangeHandler, StoreSnapshot

__all__ = ["UnsupportedFieldLog"]

log = logging.getLogger(__name__)


class _Store(Protocol):
    def snapshot(self) -> StoreSnapshot: ...

    def subscribe(self, handler: ChangeHandler) -> None: ...


class UnsupportedFieldLog:
    """Subscribed to the store: warns about the unsupported fields of what changed."""

    def __init__(self, store: _Store) -> None:
        self.store = store
        self._logged: set[Diagnostic] = set()
        store.subscribe(self.on_change)

    def on_change(self, event: ChangeEvent) -> None:
        snapshot = self.store.snapshot()
        changed: list[Any] = [snapshot.objects[k] for k in event.keys if k in snapshot.objects]
        found = object_diagnostics(changed)
        if MESH_KEY in event.keys or any(k.kind is Kind.CONFIG_MAP for k in event.keys):
            found += mesh_diagnostics(snapshot.objects.values(), snapshot.mesh, None)
        for diag in sorted(set(found) - self._logged, key=Diagnostic.sort_key):
            log.warning("%s", diag)
        self._logged.update(found)
