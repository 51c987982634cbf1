"""What a Delta client has of a type, and the step from one such state to the next.

Per stream as cheap as SotW, for a thousand streams: streams of one proxy class are mostly in the
same state, so that state (`Versions`, never changed once made) is shared, and the step
from it to the next one (what to send, what to remove, the state after) is worked out once
per push for all of them (`step`). A stream whose state becomes its own (a NACK, an
unsubscription, a reconnect naming what it has) gets a plain dict, changed in place.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence

from meshpilot.model.push_context import PushContext
from meshpilot.xds.connection import Connection, WatchedResource
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.resources import Resource, SharedResources

__all__ = ["NOTHING", "Versions", "apply_diff", "diff", "forget", "own_versions", "step"]

_ABSENT = ""  # the version of a subscribed name the client was told does not exist


class Versions(dict[str, str]):
    """The versions of the resources of one type a client has, by name, shared by the
    streams in the same state and never changed once made: a stream moves to another one
    (`step`), or, when its state becomes its own (a NACK, an unsubscription, a reconnect
    naming what it has), to a plain dict that is changed in place."""

    __slots__ = ("__weakref__",)


NOTHING = Versions()  # a stream that has nothing of a type yet
_STEPS = "xds.delta_steps"
_FORGET = "xds.delta_forget"


def diff(
    known: Mapping[str, str],
    resources: Sequence[Resource],
    watched: WatchedResource,
    only: frozenset[str] | None,
) -> tuple[list[Resource], list[str]]:
    """The resources whose version the client does not have, and the names to remove: those
    it has that are no longer generated, and subscribed ones that do not exist. An extension
    config the client has stays while it subscribes to it: the draining filter chains of an
    updated listener still run the filter that names it (removed, it would answer 500); Envoy
    unsubscribes once no filter names it."""
    changed = [r for r in resources if known.get(r.name) != r.version]
    generated = {r.name for r in resources}
    scope = known.keys() if only is None else only & known.keys()
    kept = watched.names if watched.type_url == TypeUrl.EXTENSION_CONFIG else frozenset()
    gone = {n for n in scope if known[n] != _ABSENT and n not in generated and n not in kept}
    if not watched.wildcard:
        names = watched.names if only is None else only & watched.names
        gone |= {n for n in names if n not in known and n not in generated}
    return changed, sorted(gone)


def apply_diff(
    known: dict[str, str], changed: Sequence[Resource], removed: Sequence[str], w: WatchedResource
) -> None:
    for r in changed:
        known[r.name] = r.version
    for name in removed:
        if not w.wildcard and name in w.names:
            known[name] = _ABSENT  # told once that a subscribed name does not exist
        else:
            known.pop(name, None)


def step(
    push: PushContext,
    type_url: str,
    known: Versions,
    resources: list[Resource],
    watched: WatchedResource,
    only: frozenset[str] | None,
) -> tuple[list[Resource], list[str], Versions]:
    """`diff` and `apply_diff` for a stream in a shared state, done once per push for all the
    streams in that state with the same resources and subscription (a proxy class: the
    initial sync's 4000 assignments, an endpoint push's one) and shared by them: no
    per-stream dict of thousands of versions, no per-stream diff. The source state is held
    weakly (a state left by every stream is freed), and checked by identity."""
    memo = push.memo.setdefault(_STEPS, {})
    assert isinstance(memo, dict)
    # A class's shared list (VHDS: ~2000 virtual hosts) is known by its identity: no walk
    # over its items per stream on every VirtualService change.
    shared = isinstance(resources, SharedResources)
    ids = () if shared else tuple(map(id, resources))
    names = watched.names  # large subscriptions are one shared set per class (connection.py)
    which = id(resources) if shared else hash(ids)
    key = (type_url, id(known), which, names if len(names) < 64 else id(names), only)
    found = memo.get(key)
    if (
        found is None
        or found[0]() is not known
        or not (found[1] is names or (len(names) < 64 and found[1] == names))
        or found[2] != watched.wildcard
        or not (found[3] is resources if shared else tuple(map(id, found[3])) == ids)
    ):
        changed, removed = diff(known, resources, watched, only)
        if len(changed) == len(resources):
            changed = resources  # all of them (a first answer): one list kept, not two
        after = known
        if changed or removed:
            after = Versions(known)
            apply_diff(after, changed, removed, watched)
        found = (weakref.ref(known), names, watched.wildcard, resources, changed, removed, after)
        memo[key] = found
    return found[4], found[5], found[6]


def own_versions(conn: Connection, type_url: str) -> dict[str, str]:
    """The stream's own, changeable copy of its versions of a type."""
    known = conn.known.get(type_url)
    if known is None or isinstance(known, Versions):
        known = conn.known[type_url] = dict(known or {})
    return known


def forget(
    conn: Connection, push: PushContext, type_url: str, resources: Sequence[Resource]
) -> None:
    """The client no longer has these resources at their version (they were NACKed, or
    their clusters are re-created and warm on their assignments): the next response of
    the type sends them. Shared states move to a shared state, once per push."""
    known = conn.known.get(type_url)
    if not known:
        return
    if not isinstance(known, Versions):
        for r in resources:
            known.pop(r.name, None)
        return
    memo = push.memo.setdefault(_FORGET, {})
    assert isinstance(memo, dict)
    key = (type_url, id(known), id(resources))
    found = memo.get(key)
    if found is None or found[0]() is not known or found[1] is not resources:
        after = known
        if any(r.name in known for r in resources):
            after = Versions(known)
            for r in resources:
                after.pop(r.name, None)
        found = memo[key] = (weakref.ref(known), resources, after)
    conn.known[type_url] = found[2]
