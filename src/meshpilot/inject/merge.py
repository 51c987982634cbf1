"""Merging a template's partial pod into the pod, and the post-processing Istio applies.

The merge is Kubernetes' strategic merge for the fields a template sets: maps merge, lists
of containers, volumes, env, mounts and ports merge by their key (name, mountPath,
containerPort), other values are replaced. A container `istio-proxy` or `istio-init` that
the pod itself declares is applied again over the result, so a user's settings win
(`image: auto` excepted), as Istio lets users customize the injected containers.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["INJECTED_CONTAINERS", "merge", "overlay_user_containers", "reorder"]

JSON = dict[str, Any]
INJECTED_CONTAINERS = ("istio-proxy", "istio-init")
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
}


def _merge_list(out: list[Any], overlay: list[Any], key: str) -> None:
    index = {item.get(key): i for i, item in enumerate(out) if isinstance(item, dict)}
    for item in overlay:
        at = index.get(item.get(key)) if isinstance(item, dict) else None
        if at is None:
            out.append(copy.deepcopy(item))
        else:
            _merge_into(out[at], item)


def _merge_into(out: JSON, overlay: JSON) -> None:
    """`overlay` merged into `out`, a copy of ours (only the overlay's values are copied)."""
    for field, value in overlay.items():
        current = out.get(field)
        if isinstance(value, dict) and isinstance(current, dict):
            _merge_into(current, value)
        elif field in _MERGE_KEYS and isinstance(value, list) and isinstance(current, list):
            _merge_list(current, value, _MERGE_KEYS[field])
        else:
            out[field] = copy.deepcopy(value)


def merge(base: JSON, overlay: JSON) -> JSON:
    """`overlay` strategically merged over `base` (a new document; neither is changed)."""
    out = copy.deepcopy(base)
    _merge_into(out, overlay)
    return out


def overlay_user_containers(merged: JSON, original: JSON) -> None:
    """Re-apply the pod's own istio-proxy / istio-init settings over the injected ones."""
    for section in ("containers", "initContainers"):
        user = {c.get("name"): c for c in original.get(section) or []}
        containers = merged.get(section) or []
        for i, container in enumerate(containers):
            mine = user.get(container.get("name"))
            if container.get("name") in INJECTED_CONTAINERS and mine is not None:
                mine = {k: v for k, v in mine.items() if not (k == "image" and v == "auto")}
                containers[i] = merge(container, mine)


def _move(containers: list[JSON], name: str, first: bool) -> list[JSON]:
    picked = [c for c in containers if c.get("name") == name]
    rest = [c for c in containers if c.get("name") != name]
    return picked + rest if first else rest + picked


def reorder(spec: JSON, hold: bool) -> None:
    """istio-proxy last (first when the app waits for it); istio-validation first and
    istio-init last among init containers, so other init containers still have network."""
    if "containers" in spec:
        spec["containers"] = _move(spec["containers"], "istio-proxy", first=hold)
    if "initContainers" in spec:
        spec["initContainers"] = _move(spec["initContainers"], "istio-validation", first=True)
        spec["initContainers"] = _move(spec["initContainers"], "istio-init", first=False)
