"""Normalization before comparison, as Argo CD does it: drop what the server owns (status,
managedFields, resourceVersion, uid, generation, creationTimestamp, the kubectl last-applied
annotation), fill defaults (defaults.py), fold Secret `stringData` into `data`, apply
`ignoreDifferences`, drop empty values, and sort keys so that equal meaning gives equal text.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from meshpilot.gitops.diff.defaults import DEFAULTS, FieldDefault, apply_defaults
from meshpilot.gitops.diff.ignore import IgnoreRule, remove_pointer
from meshpilot.gitops.diff.keys import Manifest, is_namespaced, key_of
from meshpilot.gitops.diff.tracking import TRACKING_ANNOTATION

__all__ = [
    "LAST_APPLIED_ANNOTATION",
    "ManifestNormalizer",
    "Normalizer",
    "normalize",
    "plain",
]

LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
_SERVER_METADATA = (
    "managedFields",
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "selfLink",
)


class Normalizer(Protocol):
    def __call__(self, obj: Manifest) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ManifestNormalizer:
    """The normalization of one Application: its destination namespace fills namespaced
    objects without one; `drop_tracking` leaves our tracking annotation out (a diff of two
    Git revisions, where it is noise; a live comparison keeps it so sync writes it)."""

    default_namespace: str = ""
    ignore: tuple[IgnoreRule, ...] = ()
    drop_tracking: bool = False
    defaults: tuple[FieldDefault, ...] = field(default=DEFAULTS)

    def __call__(self, obj: Manifest) -> dict[str, Any]:
        return normalize(
            obj,
            default_namespace=self.default_namespace,
            ignore=self.ignore,
            drop_tracking=self.drop_tracking,
            defaults=self.defaults,
        )


def normalize(
    obj: Manifest,
    *,
    default_namespace: str = "",
    ignore: tuple[IgnoreRule, ...] = (),
    drop_tracking: bool = False,
    defaults: tuple[FieldDefault, ...] = DEFAULTS,
) -> dict[str, Any]:
    """A normalized deep copy of `obj`; `obj` itself is not changed."""
    out: dict[str, Any] = plain(obj)
    out.pop("status", None)
    _metadata(out, default_namespace, drop_tracking)
    if out.get("kind") == "Secret":
        _fold_string_data(out)
    apply_defaults(out, defaults)
    key = key_of(out, default_namespace)
    for rule in ignore:
        if rule.matches(key):
            for pointer in rule.pointers:
                remove_pointer(out, pointer)
    pruned = _prune(out)
    return pruned if isinstance(pruned, dict) else {}


def plain(value: Any) -> Any:
    """A deep copy made of plain dicts and lists, keys sorted (stable order everywhere)."""
    if isinstance(value, Mapping):
        return {str(k): plain(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _metadata(out: dict[str, Any], default_namespace: str, drop_tracking: bool) -> None:
    meta = out.get("metadata")
    if not isinstance(meta, dict):
        return
    for name in _SERVER_METADATA:
        meta.pop(name, None)
    if is_namespaced(str(out.get("kind") or "")):
        if not meta.get("namespace") and default_namespace:
            meta["namespace"] = default_namespace
    else:
        meta.pop("namespace", None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED_ANNOTATION, None)
        if drop_tracking:
            annotations.pop(TRACKING_ANNOTATION, None)


def _fold_string_data(secret: dict[str, Any]) -> None:
    """`stringData` is write-only sugar for base64 `data` (it wins on a clash)."""
    string_data = secret.pop("stringData", None)
    if not isinstance(string_data, dict) or not string_data:
        return
    data = secret.get("data")
    data = dict(data) if isinstance(data, dict) else {}
    for key, value in string_data.items():
        text = "" if value is None else str(value)
        data[key] = base64.b64encode(text.encode()).decode()
    secret["data"] = {k: data[k] for k in sorted(data)}


def _prune(value: Any) -> Any:
    """Drop None and empty maps/lists: `[]`, `{}` and a missing field mean the same here."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            pruned = _prune(item)
            if pruned is None or (isinstance(pruned, dict | list) and not pruned):
                continue
            out[key] = pruned
        return out
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value
