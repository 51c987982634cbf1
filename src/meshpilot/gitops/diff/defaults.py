"""Defaults the API server (or Istio's proto semantics) fills in, kept as data.

A manifest from Git usually leaves them out; an object written by hand or by another tool may
spell them out. Filling them on both sides makes the two compare equal when they mean the same
(Argo CD gets this from the server's dry-run; we have no server, so we keep the table).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULTS", "FieldDefault", "apply_defaults"]

_ANY = "*"  # path element: every item of a list


@dataclass(frozen=True, slots=True)
class FieldDefault:
    """`path` (dotted, `*` for every list item) gets `value` where its parent exists and the
    field is missing. `copy_from` names a sibling whose value is the default instead;
    `only_if_single` applies it only when the list holding the parent has one item."""

    kind: str
    path: str
    value: Any = None
    copy_from: str = ""
    only_if_single: bool = False


DEFAULTS: tuple[FieldDefault, ...] = (
    FieldDefault("Service", "spec.type", "ClusterIP"),
    FieldDefault("Service", "spec.sessionAffinity", "None"),
    FieldDefault("Service", "spec.internalTrafficPolicy", "Cluster"),
    FieldDefault("Service", "spec.ports.*.protocol", "TCP"),
    FieldDefault("Service", "spec.ports.*.targetPort", copy_from="port"),
    FieldDefault("Secret", "type", "Opaque"),
    FieldDefault("Endpoints", "subsets.*.ports.*.protocol", "TCP"),
    FieldDefault("Pod", "spec.restartPolicy", "Always"),
    FieldDefault("Pod", "spec.dnsPolicy", "ClusterFirst"),
    FieldDefault("Pod", "spec.containers.*.ports.*.protocol", "TCP"),
    FieldDefault("Deployment", "spec.replicas", 1),
    FieldDefault("Deployment", "spec.revisionHistoryLimit", 10),
    FieldDefault("Deployment", "spec.progressDeadlineSeconds", 600),
    FieldDefault("StatefulSet", "spec.replicas", 1),
    # Istio: a lone destination takes all the traffic, with or without `weight: 100`.
    FieldDefault("VirtualService", "spec.http.*.route.*.weight", 100, only_if_single=True),
    FieldDefault("VirtualService", "spec.tcp.*.route.*.weight", 100, only_if_single=True),
    FieldDefault("VirtualService", "spec.tls.*.route.*.weight", 100, only_if_single=True),
    # Proto enums: the zero value is what an absent field means.
    FieldDefault("ServiceEntry", "spec.location", "MESH_EXTERNAL"),
    FieldDefault("ServiceEntry", "spec.resolution", "NONE"),
    FieldDefault("Gateway", "spec.servers.*.tls.mode", "PASSTHROUGH"),
)


def apply_defaults(obj: dict[str, Any], table: tuple[FieldDefault, ...] = DEFAULTS) -> None:
    """Fill the defaults of `obj`'s kind in place."""
    kind = obj.get("kind")
    for rule in table:
        if rule.kind != kind:
            continue
        *parents, field = rule.path.split(".")
        for parent, siblings in _parents(obj, parents, 1):
            if field in parent or (rule.only_if_single and siblings != 1):
                continue
            if rule.copy_from:
                if rule.copy_from in parent:
                    parent[field] = parent[rule.copy_from]
            else:
                parent[field] = rule.value


def _parents(node: Any, path: list[str], siblings: int) -> Iterator[tuple[dict[str, Any], int]]:
    """Every mapping at `path` under `node`, with the length of the list that holds it."""
    if not path:
        if isinstance(node, dict):
            yield node, siblings
        return
    head, rest = path[0], path[1:]
    if head == _ANY:
        if isinstance(node, list):
            for item in node:
                yield from _parents(item, rest, len(node))
        return
    if isinstance(node, dict) and head in node:
        yield from _parents(node[head], rest, siblings)
