"""The frozen heap's guard (meshpilot/heap.py `FrozenSet`): thawed and collected once it has
doubled, unless the proxies connected grew as much (their streams are what grew)."""

from __future__ import annotations

import gc

from meshpilot.heap import FrozenSet


def _grow(by: int) -> list[list[int]]:
    return [[i] for i in range(by)]  # one tracked object each


def test_doubling_thaws_unless_the_proxies_grew_as_much() -> None:
    gc.collect()
    gc.unfreeze()  # (a small heap to double: what earlier tests froze is collectable again)
    frozen = FrozenSet()
    frozen.settle(collect=False, streams=0)  # startup, before any proxy connects
    start = frozen.baseline
    kept = [_grow(2 * start)]
    for _ in range(2):  # the first freezes them, the next sees the count
        frozen.settle(collect=False, streams=1000)  # a thousand proxies connected meanwhile
    assert frozen.thaws == 0 and frozen.baseline > 2 * start and frozen.streams == 1000
    kept.append(_grow(2 * frozen.baseline))
    for _ in range(2):
        frozen.settle(collect=False, streams=1100)  # the heap doubled, the proxies did not
    assert frozen.thaws == 1
    assert frozen.streams == 1100
    del kept
