"""The injector of a store: ConfigMap `istio-sidecar-injector[-<rev>]` in istio-system (its
`config` and `values`) with the store's mesh config; Istio's defaults without the ConfigMap.

Read again when the store's version changes. An invalid ConfigMap is reported (once per
version) and the last good injector stays in use, as istiod keeps its last good config
when a reload fails.
"""

from __future__ import annotations

import logging
from typing import Protocol

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.core import ConfigMap
from meshpilot.inject.config import InjectConfigError, Injector, injector_from_config_map
from meshpilot.store.base import StoreSnapshot

__all__ = ["ISTIO_NAMESPACE", "StoreInjector", "injector_config_map_name"]

log = logging.getLogger(__name__)

ISTIO_NAMESPACE = "istio-system"


class _Snapshots(Protocol):
    def snapshot(self) -> StoreSnapshot: ...


def injector_config_map_name(revision: str = "") -> str:
    suffix = f"-{revision}" if revision and revision != "default" else ""
    return f"istio-sidecar-injector{suffix}"


class StoreInjector:
    """`injector()` gives the injector of the store's current version."""

    def __init__(self, store: _Snapshots, revision: str = "") -> None:
        self.store = store
        self.revision = revision
        self.error = ""  # why the current version's ConfigMap is not used, if it is not
        self._version: int | None = None
        self._injector: Injector | None = None

    def __call__(self) -> Injector:
        snapshot = self.store.snapshot()
        if self._injector is not None and snapshot.version == self._version:
            return self._injector
        self._version = snapshot.version
        name = injector_config_map_name(self.revision)
        found = snapshot.objects.get(ConfigKey(Kind.CONFIG_MAP, ISTIO_NAMESPACE, name))
        data = found.model.data if found is not None and isinstance(found.model, ConfigMap) else {}
        try:
            self._injector = injector_from_config_map(
                data, snapshot.mesh, self.revision, f"{ISTIO_NAMESPACE}/{name}"
            )
            self.error = ""
        except InjectConfigError as exc:
            self.error = str(exc)
            log.warning("injector config not used, keeping the last good one: %s", exc)
            if self._injector is None:
                self._injector = Injector(mesh=snapshot.mesh, revision=self.revision)
        return self._injector
