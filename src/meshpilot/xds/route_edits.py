"""VirtualService edits that change routes only, and the previous push's route configs that
a class rebuilds from after one (xds/generate/routes/edited_config.py).

Without this, a VirtualService change rebuilds every virtual host of its ports for every
proxy class. When the edit leaves the VirtualService's
hosts, gateways, exportTo and place in precedence order as they were, everything that
decides which virtual hosts a route config has, their names and their domains, is as before:
only the routes of the virtual hosts the VirtualService owns differ. A class then takes its
previous config and swaps those virtual hosts' routes; anything it cannot prove the same
(the VirtualService did not own the virtual host before, its routes came or went, it names a
host without a service on the port) falls back to the full build.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass, field
from typing import cast

from meshpilot.config.istio.virtual_service import VirtualService
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.model.indexes.virtual_services import BoundVirtualService
from meshpilot.model.push_context import PushContext

__all__ = ["RouteEdits", "route_edits", "routes_only_edits", "set_route_edits"]

_MEMO = "rds.route-edits"


@dataclass(frozen=True, slots=True)
class RouteEdits:
    """The VirtualServices whose edit changed routes only, and the previous push's sidecar
    route configs of the ports they touch (by the route cache's key)."""

    edited: tuple[BoundVirtualService, ...]  # as bound in the new push
    previous: Mapping[Hashable, object] = field(default_factory=dict)


def routes_only_edits(
    old: PushContext, new: PushContext, changed: Collection[ConfigKey]
) -> tuple[BoundVirtualService, ...] | None:
    """The new push's bindings of `changed` if every one is a VirtualService edited in its
    routes only; else None."""
    old_bound = {vs.obj.key: vs for vs in old.virtual_services.all}
    new_bound = {vs.obj.key: vs for vs in new.virtual_services.all}
    edited = []
    for key in sorted(changed):
        if key.kind is not Kind.VIRTUAL_SERVICE:
            return None
        before, after = old_bound.get(key), new_bound.get(key)
        if before is None or after is None or not _same_place(before, after):
            return None
        edited.append(after)
    return tuple(edited)


def _same_place(before: BoundVirtualService, after: BoundVirtualService) -> bool:
    """Same hosts, gateways, exportTo and precedence; routes matched on no client label
    (those tell proxy classes apart: routes/sidecar.py `_tested_labels`)."""
    a, b = before.obj.model, after.obj.model
    return (
        before.hosts == after.hosts
        and not any(h.startswith("*") for h in after.hosts)
        and before.gateways == after.gateways
        and a.spec.export_to == b.spec.export_to
        and a.metadata.creation_timestamp == b.metadata.creation_timestamp
        and not _tests_labels(a)
        and not _tests_labels(b)
    )


def _tests_labels(vs: VirtualService) -> bool:
    return any(m.source_labels for r in vs.spec.http for m in r.match)


def set_route_edits(push: PushContext, edits: RouteEdits) -> None:
    push.memo[_MEMO] = edits


def route_edits(push: PushContext) -> RouteEdits | None:
    """What the change that made `push` edited, if routes only (set by xds/cache.py)."""
    return cast(RouteEdits | None, push.memo.get(_MEMO))
