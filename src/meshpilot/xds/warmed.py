"""A stream's resources of a push, worked out before the push went out (xds/speculation.py).

Kept in the push's memo by stream and type, with what they were generated from (a push's
resources of a type depend on nothing else): the very Proxy and the names asked for. The
stream's push takes them only for that Proxy (its pod changed: a new one) and the same
names (a request since may have changed them); else it generates as usual. Taken once: an
entry leaves the memo when its stream's push asks for it (a CDS list is 4000 references),
so they are held only between the warm-up and the push.
"""

from __future__ import annotations

from collections.abc import Collection

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.resources import Resource

__all__ = ["keep_warmed", "warmed"]

_MEMO_KEY = "xds.warmed"
_Entry = tuple[Proxy, Collection[str] | None, list[Resource]]


def keep_warmed(
    push: PushContext,
    stream: int,
    type_url: str,
    proxy: Proxy,
    names: Collection[str] | None,
    resources: list[Resource],
) -> None:
    memo = push.memo.setdefault(_MEMO_KEY, {})
    assert isinstance(memo, dict)
    memo[(stream, type_url)] = (proxy, names, resources)


def warmed(
    push: PushContext,
    stream: int,
    type_url: str,
    proxy: Proxy,
    names: Collection[str] | None,
) -> list[Resource] | None:
    """The resources kept for this stream and type, if made for this very Proxy and the
    same names. (`stream`: the connection's id(); the entry pins the Proxy, which no later
    connection with the same id() has.)"""
    memo = push.memo.get(_MEMO_KEY)
    if not isinstance(memo, dict):
        return None
    found: _Entry | None = memo.pop((stream, type_url), None)
    if found is None or found[0] is not proxy or not (found[1] is names or found[1] == names):
        return None
    return found[2]
