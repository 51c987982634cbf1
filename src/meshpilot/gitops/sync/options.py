"""Sync options: the Application's `syncPolicy.syncOptions` and a resource's
`argocd.argoproj.io/sync-options` annotation, parsed and checked.

The store has no field managers and always replaces whole objects, so ServerSideApply=true
and Replace=true change nothing here: they are accepted and reported as no-ops. Validation
cannot be turned off (Validate=false is refused: the mesh would reject the object anyway).
Unknown options and bad values are refused with the option named.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from meshpilot.errors import MeshpilotError

__all__ = [
    "ResourceSyncOptions",
    "SyncOptionError",
    "SyncOptions",
    "parse_resource_options",
    "parse_sync_options",
]

_APP_BOOLS = {
    "CreateNamespace": "create_namespace",
    "PruneLast": "prune_last",
    "ApplyOutOfSyncOnly": "apply_out_of_sync_only",
    "ServerSideApply": "server_side_apply",
    "Replace": "replace",
    "RespectIgnoreDifferences": "respect_ignore_differences",
    "FailOnSharedResource": "fail_on_shared_resource",
    "SkipDryRunOnMissingResource": "skip_dry_run_on_missing_resource",
    "Validate": "validate",
    "Force": "force",
}
_PROPAGATION = ("foreground", "background", "orphan")
_NO_OPS = {
    "ServerSideApply": "the store replaces whole objects and keeps no field managers",
    "Replace": "the store always replaces whole objects",
    "Force": "the store always replaces whole objects",
    "SkipDryRunOnMissingResource": "the dry run needs no server-side schema",
}


class SyncOptionError(MeshpilotError):
    """A sync option that is unknown, malformed or cannot be honoured."""


@dataclass(frozen=True, slots=True)
class SyncOptions:
    create_namespace: bool = False
    prune_last: bool = False
    apply_out_of_sync_only: bool = False
    server_side_apply: bool = False
    replace: bool = False
    respect_ignore_differences: bool = False
    # Shared resources are never overwritten here; this only makes the refusal explicit.
    fail_on_shared_resource: bool = False
    skip_dry_run_on_missing_resource: bool = False
    validate: bool = True
    force: bool = False
    prune_propagation_policy: str = "foreground"
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceSyncOptions:
    """A resource's own options (annotation); `prune`/`delete` False mean never remove it."""

    prune: bool = True
    delete: bool = True
    prune_last: bool = False
    notes: tuple[str, ...] = ()


def _split(option: str, where: str) -> tuple[str, str]:
    name, eq, value = option.strip().partition("=")
    if not eq or not name or not value:
        raise SyncOptionError(f"{where}: {option!r} is not of the form Name=value")
    return name, value


def _bool(name: str, value: str, where: str) -> bool:
    if value in ("true", "false"):
        return value == "true"
    raise SyncOptionError(f"{where}: {name}={value}: expected true or false")


def parse_sync_options(
    options: Iterable[str], where: str = "syncPolicy.syncOptions"
) -> SyncOptions:
    values: dict[str, Any] = {}
    notes: list[str] = []
    for option in options:
        name, value = _split(option, where)
        if name == "PrunePropagationPolicy":
            if value not in _PROPAGATION:
                raise SyncOptionError(
                    f"{where}: {option}: expected one of {', '.join(_PROPAGATION)}"
                )
            values["prune_propagation_policy"] = value
            continue
        if name not in _APP_BOOLS:
            known = ", ".join(sorted([*_APP_BOOLS, "PrunePropagationPolicy"]))
            raise SyncOptionError(f"{where}: unknown sync option {name!r} (known: {known})")
        flag = _bool(name, value, where)
        if name == "Validate" and not flag:
            raise SyncOptionError(
                f"{where}: Validate=false is not supported: every object is validated"
            )
        if name in _NO_OPS and flag:
            notes.append(f"{name}=true has no effect: {_NO_OPS[name]}")
        values[_APP_BOOLS[name]] = flag
    return SyncOptions(**values, notes=tuple(notes))


def parse_resource_options(options: Iterable[str], where: str) -> ResourceSyncOptions:
    """Options from a resource's annotation. `Prune=confirm` / `Delete=confirm` (Argo CD's
    manual confirmation) are taken as false: nothing here asks for confirmation."""
    prune, delete, prune_last = True, True, False
    notes: list[str] = []
    for option in options:
        name, value = _split(option, where)
        if name in ("Prune", "Delete"):
            allowed = False if value == "confirm" else _bool(name, value, where)
            if name == "Prune":
                prune = allowed
            else:
                delete = allowed
        elif name == "PruneLast":
            prune_last = _bool(name, value, where)
        elif name in _NO_OPS or name == "Validate":
            flag = _bool(name, value, where)
            if name == "Validate" and not flag:
                raise SyncOptionError(
                    f"{where}: Validate=false is not supported: every object is validated"
                )
            if flag and name in _NO_OPS:
                notes.append(f"{name}=true has no effect: {_NO_OPS[name]}")
        else:
            raise SyncOptionError(f"{where}: unknown sync option {name!r}")
    return ResourceSyncOptions(prune, delete, prune_last, tuple(notes))
