"""Remembered comparisons: the same target and live objects are not diffed again, a
replaced object is, and the results are those of a comparison without the memory."""

from __future__ import annotations

from typing import Any

from meshpilot.gitops.diff import ResourceKey, compare_app
from meshpilot.gitops.diff.memo import PairMemo
from meshpilot.gitops.diff.tracking import with_tracking
from meshpilot.gitops.model.status import SyncStatusCode


def _cm(name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"k": value},
    }


def _live(obj: dict[str, Any]) -> dict[str, Any]:
    key = ResourceKey("", "ConfigMap", "shop", obj["metadata"]["name"])
    out = with_tracking(obj, "shop", key)
    out["metadata"]["namespace"] = "shop"
    return out


def _statuses(
    targets: list[dict[str, Any]], live: list[dict[str, Any]], memo: PairMemo | None
) -> list[Any]:
    result = compare_app("shop", targets, live, namespace="shop", memo=memo)
    return [(r.key.name, r.status, r.text, r.requires_pruning) for r in result.resources]


def test_memory_reuses_unchanged_pairs_only() -> None:
    memo = PairMemo()
    targets = [_cm("a", "1"), _cm("b", "1")]
    live = [_live(_cm("a", "1")), _live(_cm("b", "1")), _live(_cm("gone", "1"))]
    first = _statuses(targets, live, memo)
    assert first == _statuses(targets, live, None)
    assert (memo.hits, memo.misses) == (0, 3)
    assert _statuses(targets, live, memo) == first
    assert memo.hits == 3
    live[1] = _live(_cm("b", "2"))  # a drift: the store hands out a new object
    again = _statuses(targets, live, memo)
    assert again == _statuses(targets, live, None)
    assert (memo.hits, memo.misses) == (5, 4)
    assert dict((n, s) for n, s, _, _ in again)["b"] is SyncStatusCode.OUT_OF_SYNC


def test_equal_but_new_objects_are_compared_again() -> None:
    """Identity, not equality: a caller that copies its inputs gets correct results."""
    memo = PairMemo()
    target, live = _cm("a", "1"), _live(_cm("a", "1"))
    _statuses([target], [live], memo)
    _statuses([dict(target)], [live], memo)
    assert memo.hits == 0
