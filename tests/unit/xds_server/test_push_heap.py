"""The replaced pushes the server holds (xds/push_heap.py): let go only once every stream
is on the current push, and never more than MAX_RETIRED of them."""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any

from meshpilot.xds.push_heap import MAX_RETIRED, PushHeap


@dataclass
class Stream:
    push: Any  # what a Connection's `push` is: the push context it was last sent


def test_replaced_pushes_wait_for_every_stream_to_move_on() -> None:
    heap = PushHeap()
    first, second = object(), object()
    heap.on_push(None, full=True, serving=True)
    assert heap.retired == []
    heap.on_push(first, full=True, serving=True)  # type: ignore[arg-type]
    streams = [Stream(second), Stream(first)]  # one stream not handed the new push yet
    heap.release(second, streams)  # type: ignore[arg-type]
    assert heap.retired == [first]
    streams[1].push = second
    heap.release(second, streams)  # type: ignore[arg-type]
    assert heap.retired == []


def test_pushes_that_keep_coming_do_not_pile_up() -> None:
    heap = PushHeap()
    pushes = [object() for _ in range(MAX_RETIRED + 3)]
    for push in pushes:
        heap.on_push(push, full=True, serving=True)  # type: ignore[arg-type]
    assert heap.retired == pushes[-MAX_RETIRED:]


def test_collection_pauses_for_an_eds_push_only() -> None:
    heap = PushHeap()
    try:
        heap.on_push(None, full=False, serving=True)
        assert not gc.isenabled()
        heap.on_push(None, full=True, serving=True)  # a full push allocates: collections on
        assert gc.isenabled()
        heap.on_push(None, full=False, serving=True)
        heap.resume_gc()
        assert gc.isenabled()
    finally:
        gc.enable()
