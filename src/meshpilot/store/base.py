"""The store protocols, read, write and watch: typed, validated objects by key, snapshots and
change events.

    ConfigStore     read: snapshots, objects by key, change events (watched files, every backend)
    LiveStore       + write: whole objects, all or nothing (`meshpilot apply`, GitOps sync)
    WatchedStore    + follow other processes' writes (the directory, etcd and kube backends)

Backends (store/files.py, store/directory/, store/etcd/, store/kube/) hold every object by (kind,
namespace, name). Nothing downstream sees an invalid object: a source
that reads one keeps the last good version of it and reports the problem as a Diagnostic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.mesh import MeshConfig
from meshpilot.config.objects import ConfigObject
from meshpilot.config.yaml_source import RawDocument

if TYPE_CHECKING:  # writes.py builds on this module
    from meshpilot.store.writes import ApplyResult, DeleteResult

__all__ = [
    "MESH_KEY",
    "ChangeEvent",
    "ChangeHandler",
    "ConfigStore",
    "LiveStore",
    "StoreSnapshot",
    "WatchedStore",
]

# The key a change of the mesh settings is reported under.
MESH_KEY = ConfigKey(Kind.MESH_CONFIG, "", "mesh")


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """Objects that were added, changed or removed, and the store version that has them."""

    keys: frozenset[ConfigKey]
    store_version: int
    # Whole writes of a store whose writers commit all-or-nothing (the directory store's
    # journal): nothing more of the same change is on its way, so discovery need not wait
    # for the rest of a burst. Watched files are written one at a time: False.
    whole_writes: bool = False
    # Keys whose stored state is this store handle's own latest write (a GitOps sync's
    # echo: the controller compared and recorded it already, so it is not drift).
    written_here: frozenset[ConfigKey] = frozenset()


ChangeHandler = Callable[[ChangeEvent], None]


@dataclass(frozen=True, slots=True)
class StoreSnapshot:
    """One consistent version of the store: what a PushContext is built from."""

    version: int
    objects: Mapping[ConfigKey, ConfigObject[Any]] = field(default_factory=dict)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    # Problems of the latest read; objects they name keep their last good version.
    diagnostics: tuple[Diagnostic, ...] = ()
    # Keys served from an earlier read because their current source is invalid.
    stale: frozenset[ConfigKey] = frozenset()
    # Set when the latest read failed as a whole: everything is the last good version.
    error: str | None = None

    def of_kind(self, kind: Kind) -> list[ConfigObject[Any]]:
        return [obj for key, obj in sorted(self.objects.items()) if key.kind is kind]


class ConfigStore(Protocol):
    """What the control plane (and later GitOps) needs from a store."""

    def snapshot(self) -> StoreSnapshot:
        """The current version; cheap, and never changes after it is returned."""
        ...

    def get(self, key: ConfigKey) -> ConfigObject[Any] | None: ...

    def subscribe(self, handler: ChangeHandler) -> None:
        """Call `handler` (on the store's event loop) after every change."""
        ...


class LiveStore(ConfigStore, Protocol):
    """A ConfigStore that can be written: what GitOps sync and `meshpilot apply` use."""

    def manifest(self, key: ConfigKey) -> dict[str, Any] | None:
        """The stored object as a plain dict (a copy), with its server-set fields."""
        ...

    def apply(
        self, documents: Sequence[RawDocument], *, dry_run: bool = False, durable: bool = True
    ) -> list[ApplyResult]:
        """Validate and write whole objects, all or nothing. `durable=False`: atomic for
        readers but not fsynced (status a controller recomputes anyway)."""
        ...

    def delete(self, keys: Sequence[ConfigKey], *, dry_run: bool = False) -> list[DeleteResult]: ...


class WatchedStore(LiveStore, Protocol):
    """A live store that follows other processes' writes."""

    def shared_manifest(self, key: ConfigKey) -> dict[str, Any] | None:
        """The stored manifest itself, not a copy: the caller must never change it."""
        ...

    def load(self) -> ChangeEvent | None:
        """Read the whole store now."""
        ...

    def refresh(self) -> ChangeEvent | None:
        """Take in what was written since the last look; handlers run in this thread."""
        ...

    async def watch(self) -> None:
        """Follow the store until cancelled, calling handlers on this event loop."""
        ...
