"""The store's next objects from the files that changed alone, when that is all they can change.

A FileStore read merges every file's objects in file order, then compares every object with
the store's (store/files.py): work proportional to the whole mesh for one edited
VirtualService, on the way of every push. When the edit is clean, the result only
differs in the keys of the files read again, so it is worked out from those alone: the
store's objects with those files' old keys taken out and their new objects put in.

Clean means the whole-read rules (first object of a key wins, a second mesh config is
reported, an invalid object keeps its last good version) would decide nothing: no file read
again (before or now) holds a mesh config or an error, none of its keys is defined by another
file, the last read reported no duplicate, no object of those files is stale, and no key
they remove is named by an error elsewhere (an invalid copy keeps the last good version).
Anything else is left to the whole merge, as is a store that has nothing to compare with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import CLUSTER_SCOPED, Kind
from meshpilot.config.loader import LoadResult
from meshpilot.config.objects import ConfigObject
from meshpilot.store.base import StoreSnapshot

__all__ = ["Edited", "diagnostic_key", "edited_objects"]

# What a whole merge reports and the per-file results do not hold.
_MERGE_MESSAGES = ("duplicate object:", "a second mesh config")


@dataclass(frozen=True, slots=True)
class Edited:
    objects: dict[ConfigKey, ConfigObject[Any]]
    changed: set[ConfigKey]
    diagnostics: tuple[Diagnostic, ...]


def edited_objects(
    old: StoreSnapshot, before: Mapping[str, LoadResult], after: Mapping[str, LoadResult]
) -> Edited | None:
    """The objects, changed keys and diagnostics a whole merge of `after` (every file's
    result, in file order) would give after `old`, whose files' results were `before`;
    None when it must merge them whole."""
    if not before or old.error is not None or not old.version:
        return None
    touched = {f for f, r in after.items() if before.get(f) is not r}
    touched |= before.keys() - after.keys()
    if not touched or any(d.message.startswith(_MERGE_MESSAGES) for d in old.diagnostics):
        return None
    results = [r for f in touched for r in (before.get(f), after.get(f)) if r is not None]
    if any(r.mesh_origin is not None or r.errors for r in results):
        return None
    objects = old.objects
    if any(objects[k].origin.file in touched for k in old.stale if k in objects):
        return None
    gone = {o.key for f in touched if (r := before.get(f)) for o in r.objects}
    new = [o for f in touched if (r := after.get(f)) for o in r.objects]
    new_keys = {o.key for o in new}
    if len(new_keys) != len(new):
        return None  # a key in two of the files read again
    for key in gone | new_keys:
        held = objects.get(key)
        if held is not None and held.origin.file not in touched:
            return None  # also defined by a file not read again
    changed = gone - new_keys
    if changed & {diagnostic_key(d) for r in after.values() for d in r.errors}:
        return None  # an invalid copy elsewhere keeps the last good version of a removed one
    edited = dict(objects)
    for key in changed:
        del edited[key]
    for obj in new:
        held = edited.get(obj.key)
        edited[obj.key] = obj
        if held is None or held.model != obj.model:
            changed.add(obj.key)
    return Edited(edited, changed, tuple(d for r in after.values() for d in r.diagnostics))


def diagnostic_key(diag: Diagnostic) -> ConfigKey | None:
    """The key of the object a diagnostic names, if it names one."""
    try:
        kind = Kind(diag.kind)
    except ValueError:
        return None
    namespace = "" if kind in CLUSTER_SCOPED else (diag.namespace or "default")
    return ConfigKey(kind, namespace, diag.name) if diag.name else None
