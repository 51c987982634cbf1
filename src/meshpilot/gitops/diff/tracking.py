"""Which Application owns a live object: Argo CD's annotation tracking,
`argocd.argoproj.io/tracking-id: <app>:<group>/<kind>:<namespace>/<name>`.

A copied object carries its original's id, which then names another identity; Argo CD does
not count such an object as owned, and neither do we.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from meshpilot.gitops.diff.keys import Manifest, ResourceKey, key_of

__all__ = [
    "TRACKING_ANNOTATION",
    "Tracking",
    "owner_of",
    "parse_tracking_id",
    "tracking_id",
    "with_tracking",
]

TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"


@dataclass(frozen=True, slots=True)
class Tracking:
    app: str
    key: ResourceKey


def tracking_id(app: str, key: ResourceKey) -> str:
    return f"{app}:{key.group}/{key.kind}:{key.namespace}/{key.name}"


def parse_tracking_id(value: str) -> Tracking | None:
    """The parts of a tracking id; None when `value` is not in the format."""
    parts = value.split(":", 2)
    if len(parts) != 3 or not parts[0]:
        return None
    group, slash1, kind = parts[1].partition("/")
    namespace, slash2, name = parts[2].partition("/")
    if not slash1 or not slash2 or "/" in kind or "/" in name or not kind or not name:
        return None
    return Tracking(parts[0], ResourceKey(group, kind, namespace, name))


def owner_of(obj: Manifest) -> str | None:
    """The Application that owns `obj`, or None when nothing (valid) tracks it."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(TRACKING_ANNOTATION)
    if not isinstance(value, str):
        return None
    parsed = parse_tracking_id(value)
    if parsed is None or parsed.key != key_of(obj, parsed.key.namespace):
        return None
    return parsed.app


def with_tracking(obj: Manifest, app: str, key: ResourceKey) -> dict[str, Any]:
    """A copy of `obj` carrying the tracking annotation of `app` (what sync writes)."""
    out: dict[str, Any] = copy.deepcopy(dict(obj))
    meta = out.setdefault("metadata", {})
    annotations = dict(meta.get("annotations") or {})
    annotations[TRACKING_ANNOTATION] = tracking_id(app, key)
    meta["annotations"] = annotations
    return out
