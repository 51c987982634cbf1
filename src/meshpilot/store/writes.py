"""Writing to a live store: results, errors, and the server-side fields a write sets.

    StoreWriteError            (a MeshpilotError) nothing was written
    ├── InvalidObjectsError    objects the loader refuses; carries its Diagnostics
    └── ConflictError          a stale resourceVersion (optimistic concurrency)

A write behaves like `kubectl apply` of whole objects, with two fields kept from the stored
version when the new one leaves them out: `status` (a status subresource: the controller
writes it, `meshpilot apply` of a manifest does not wipe it) and the ownership annotation
(`argocd.argoproj.io/tracking-id`), so a hand edit of a synced object is drift of that
app, not an orphan.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.keys import ConfigKey
from meshpilot.errors import MeshpilotError
from meshpilot.store.resources import resource_type

__all__ = [
    "TRACKING_ANNOTATION",
    "ApplyAction",
    "ApplyResult",
    "ConflictError",
    "DeleteResult",
    "InvalidObjectsError",
    "StoreWriteError",
    "keeps_stored",
    "prepare_manifest",
]

TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"
# Set by the store on every write; ignored when deciding "unchanged".
_SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "generation")

Manifest = dict[str, Any]


class StoreWriteError(MeshpilotError):
    """A write was refused as a whole; the store is unchanged."""


class InvalidObjectsError(StoreWriteError):
    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class ConflictError(StoreWriteError):
    def __init__(self, key: ConfigKey, message: str) -> None:
        self.key = key
        plural = resource_type(key.kind).qualified_plural
        super().__init__(f'Operation cannot be fulfilled on {plural} "{key.name}": {message}')


class ApplyAction(StrEnum):
    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class ApplyResult:
    key: ConfigKey
    action: ApplyAction
    resource_version: str  # of the object as stored (unchanged: the existing one)

    @property
    def message(self) -> str:
        """`virtualservice.networking.istio.io/reviews configured`."""
        return f"{resource_type(self.key.kind).display_name(self.key.name)} {self.action}"


@dataclass(frozen=True, slots=True)
class DeleteResult:
    key: ConfigKey
    deleted: bool  # False: there was no such object

    @property
    def message(self) -> str:
        rt = resource_type(self.key.kind)
        if self.deleted:
            singular = f"{rt.singular}.{rt.group}" if rt.group else rt.singular
            return f'{singular} "{self.key.name}" deleted'
        return f'{rt.qualified_plural} "{self.key.name}" not found'


def prepare_manifest(
    key: ConfigKey, incoming: Manifest, existing: Manifest | None, version: int
) -> tuple[Manifest, ApplyAction]:
    """The object to store for `incoming`, and whether that creates, changes or keeps it.

    Raises ConflictError when `incoming` names a resourceVersion other than the stored one.
    """
    new = copy.deepcopy(incoming)
    meta = new.setdefault("metadata", {})
    wanted_rv = str(meta.get("resourceVersion") or "")
    old_meta = (existing or {}).get("metadata") or {}
    if wanted_rv and existing is None:
        raise ConflictError(key, f"the object does not exist (resourceVersion {wanted_rv} given)")
    if wanted_rv and wanted_rv != str(old_meta.get("resourceVersion", "")):
        raise ConflictError(
            key,
            "the object has been modified; please apply your changes to the latest version "
            "and try again",
        )
    if key.namespace:
        meta["namespace"] = key.namespace
    if existing is not None:
        _keep_owned_fields(new, existing)
    for name in _SERVER_FIELDS:
        meta.pop(name, None)
    if existing is not None and _comparable(new) == _comparable(existing):
        return copy.deepcopy(existing), ApplyAction.UNCHANGED
    meta["resourceVersion"] = str(version)
    meta["uid"] = old_meta.get("uid") or str(uuid.uuid4())
    meta["creationTimestamp"] = old_meta.get("creationTimestamp") or _now()
    generation = int(old_meta.get("generation") or 0)
    if existing is None or new.get("spec") != existing.get("spec"):
        generation += 1
    meta["generation"] = generation
    action = ApplyAction.CREATED if existing is None else ApplyAction.CONFIGURED
    return new, action


def _keep_owned_fields(new: Manifest, existing: Manifest) -> None:
    if "status" not in new and "status" in existing:
        new["status"] = copy.deepcopy(existing["status"])
    old_tracking = ((existing.get("metadata") or {}).get("annotations") or {}).get(
        TRACKING_ANNOTATION
    )
    annotations = new["metadata"].get("annotations") or {}
    if old_tracking is not None and TRACKING_ANNOTATION not in annotations:
        new["metadata"]["annotations"] = {**annotations, TRACKING_ANNOTATION: old_tracking}


def _comparable(obj: Manifest) -> Manifest:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_FIELDS}
    return {**obj, "metadata": meta}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def keeps_stored(key: ConfigKey, incoming: Manifest, existing: Mapping[str, Any] | None) -> bool:
    """Whether writing `incoming` over `existing` would leave the stored object as it is
    (prepare_manifest's `unchanged` rule, without copying either object); a caller may
    then skip the write entirely."""
    if existing is None:
        return False
    meta = dict(incoming.get("metadata") or {})
    old_meta = existing.get("metadata") or {}
    wanted_rv = str(meta.get("resourceVersion") or "")
    if wanted_rv and wanted_rv != str(old_meta.get("resourceVersion", "")):
        return False  # the write would be refused
    if key.namespace:
        meta["namespace"] = key.namespace
    new = {**incoming, "metadata": meta}
    if "status" not in new and "status" in existing:
        new["status"] = existing["status"]
    old_tracking = (old_meta.get("annotations") or {}).get(TRACKING_ANNOTATION)
    annotations = meta.get("annotations") or {}
    if old_tracking is not None and TRACKING_ANNOTATION not in annotations:
        meta["annotations"] = {**annotations, TRACKING_ANNOTATION: old_tracking}
    return _comparable(new) == _comparable(dict(existing))
