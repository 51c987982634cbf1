"""A stream's Delta push worked out to its response bytes before the push went out.

While a change waits out its debounce, the speculation (xds/speculation.py) works out each
stream's push (xds/delta.py `warm_delta_push`): the types it sends, the step from what the
client has to what it will have, the response with its nonce. When the push comes, the
stream applies that outcome (the versions, the in-flight response, the sent nonce) instead
of working it out again, which takes that per-stream work off the push's way to the proxies.

The outcome holds only while everything it was worked out from is the same: the stream's
previous push and Proxy, every watched type's value (frozen: any request or response for a
type replaces it), and each planned type's known versions (shared `Versions`, never changed
once made). Anything else, and the stream works its push out as it would have. A stream
whose versions are its own (a dict changed in place) or whose push re-creates clusters
(their assignments are resent: the step of EDS depends on the CDS one) is not prepared.
Taken once: the push's memo holds an entry only between the warm-up and the push.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.metrics import Counter
from meshpilot.xds.resources import Resource

if TYPE_CHECKING:
    from meshpilot.xds.connection import Connection, WatchedResource

__all__ = ["PreparedPush", "PreparedResponse", "keep_prepared", "take_prepared"]

_MEMO_KEY = "xds.prepared"


@dataclass(frozen=True, slots=True)
class PreparedResponse:
    """One type's response of the push, and the client's versions after it."""

    type_url: str
    after: dict[str, str]
    changed: Sequence[Resource]
    removed: Sequence[str]
    nonce: str
    response: bytes
    build_s: float  # the time it took to work out (pilot_xds_push_time)


@dataclass(frozen=True, slots=True)
class PreparedPush:
    # The stream's push when it was worked out, by identity (id and version: the version's
    # counter is never reused), not held: an entry left by a stream that went away must not
    # keep a whole PushContext alive until the next push.
    prev: tuple[int, str]
    was: Proxy  # the stream's Proxy then
    proxy: Proxy  # the one it pushes with
    watched: tuple[WatchedResource, ...]  # every watched type's value, in order
    known: tuple[tuple[str, object], ...]  # each planned type's versions then
    responses: tuple[PreparedResponse, ...]
    small: bool  # every response is small: none waits for the send budget

    def holds_for(self, conn: Connection) -> bool:
        """Is the stream where it was when this was worked out?"""
        if (id(conn.push), conn.push.version) != self.prev or conn.proxy is not self.was:
            return False
        watched = conn.watched
        if len(watched) != len(self.watched):
            return False
        for now, then in zip(watched.values(), self.watched, strict=True):
            if now is not then:
                return False
        known = conn.known
        return all(known.get(type_url) is then for type_url, then in self.known)


def keep_prepared(push: PushContext, stream: int, prepared: PreparedPush) -> None:
    memo = push.memo.setdefault(_MEMO_KEY, {})
    assert isinstance(memo, dict)
    memo[stream] = prepared


def take_prepared(
    push: PushContext | None, conn: Connection, counted: Counter
) -> PreparedPush | None:
    """The push worked out for this stream, if it still holds (taken either way, and
    counted: applied or redone)."""
    memo = push.memo.get(_MEMO_KEY) if push is not None else None
    if not memo:
        return None
    assert isinstance(memo, dict)
    found: PreparedPush | None = memo.pop(id(conn), None)
    if found is None:
        return None
    if not found.holds_for(conn):
        counted.inc("redone")
        return None
    counted.inc("applied")
    return found
