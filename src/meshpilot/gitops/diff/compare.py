"""Compare an Application's target manifests (from Git) with live objects (from the store).

Pairs by (group, kind, namespace, name), the destination namespace filling namespaced targets
without one. A live object only counts as this app's when its tracking annotation says so:
live-only objects of this app require pruning, live-only objects of others are not ours to
look at, and a target whose live object another app tracks is a conflict (Argo CD's
SharedResourceWarning) that sync must not overwrite. Hooks are not compared.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from meshpilot.gitops.diff.annotations import COMPARE_OPTIONS, is_hook, options_of
from meshpilot.gitops.diff.ignore import IgnoreRule
from meshpilot.gitops.diff.keys import Manifest, ResourceKey, key_of
from meshpilot.gitops.diff.mask import mask_secrets
from meshpilot.gitops.diff.memo import PairMemo
from meshpilot.gitops.diff.normalize import ManifestNormalizer
from meshpilot.gitops.diff.result import Comparison, Condition, DiffResult, ResourceResult
from meshpilot.gitops.diff.text import unified_diff
from meshpilot.gitops.diff.tracking import owner_of, with_tracking
from meshpilot.gitops.model.status import ConditionType, SyncStatusCode

__all__ = ["compare_app", "diff_objects"]


def compare_app(
    app: str,
    targets: Sequence[Manifest],
    live: Iterable[Manifest],
    *,
    namespace: str = "",
    ignore: tuple[IgnoreRule, ...] = (),
    memo: PairMemo | None = None,
) -> Comparison:
    """Compare `targets` with `live` (which may hold the whole store: objects that neither
    match a target nor belong to `app` are left alone). `namespace` is the destination;
    `memo` remembers pairs already compared (see memo.py)."""
    normalizer = ManifestNormalizer(default_namespace=namespace, ignore=ignore)
    hooks = tuple(t for t in targets if is_hook(t))
    conditions: list[Condition] = []
    wanted: dict[ResourceKey, Manifest] = {}
    counts: Counter[ResourceKey] = Counter()
    for target in targets:
        if is_hook(target):
            continue
        key = key_of(target, namespace)
        counts[key] += 1
        wanted.setdefault(key, target)
    for key, count in sorted(counts.items()):
        if count > 1:
            conditions.append(
                Condition(
                    ConditionType.REPEATED_RESOURCE_WARNING,
                    f"Resource {key} appeared {count} times among application resources.",
                )
            )
    stored = {key_of(obj): obj for obj in live if not is_hook(obj)}
    results = []
    for key, target in wanted.items():
        current = stored.get(key)
        owner = owner_of(current) if current is not None else None
        result = _memo_pair(memo, app, key, target, current, normalizer)
        if owner is not None and owner != app:
            result = _conflict(result, owner)
            conditions.append(
                Condition(
                    ConditionType.SHARED_RESOURCE_WARNING,
                    f"{key.kind}/{key.name} is part of applications {owner} and {app}",
                )
            )
        results.append(result)
    for key, current in stored.items():
        if key not in wanted and owner_of(current) == app:
            results.append(_memo_pair(memo, app, key, None, current, normalizer))
    results.sort(key=lambda r: r.key)
    return Comparison(app, tuple(results), hooks, tuple(conditions))


def diff_objects(
    live: Manifest | None, target: Manifest | None, normalizer: ManifestNormalizer, label: str
) -> tuple[DiffResult, Callable[[], str]]:
    """Normalize both sides and compare; the masked unified diff is rendered by the
    returned function (only when someone shows it)."""
    norm_target = normalizer(target) if target is not None else None
    norm_live = normalizer(_as_version_of(live, target)) if live is not None else None
    modified = norm_target != norm_live

    def text() -> str:
        if not modified:
            return ""
        shown_target, shown_live = mask_secrets(norm_target, norm_live)
        return unified_diff(shown_live, shown_target, label)

    return DiffResult(modified, norm_live, norm_target), text


def _memo_pair(
    memo: PairMemo | None,
    app: str,
    key: ResourceKey,
    target: Manifest | None,
    live: Manifest | None,
    normalizer: ManifestNormalizer,
) -> ResourceResult:
    if memo is None:
        return _pair(app, key, target, live, normalizer)
    return memo.pair(
        app, key, target, live, normalizer, lambda: _pair(app, key, target, live, normalizer)
    )


def _pair(
    app: str,
    key: ResourceKey,
    target: Manifest | None,
    live: Manifest | None,
    normalizer: ManifestNormalizer,
) -> ResourceResult:
    tracked = with_tracking(target, app, key) if target is not None else None
    diff, text_of = diff_objects(live, tracked, normalizer, str(key))
    return ResourceResult(
        key=key,
        status=SyncStatusCode.OUT_OF_SYNC if diff.modified else SyncStatusCode.SYNCED,
        diff=diff,
        text_of=text_of,
        target=tracked,
        live=live,
        requires_pruning=target is None,
        ignore_extraneous=target is None
        and "IgnoreExtraneous" in options_of(live, COMPARE_OPTIONS),
    )


def _conflict(result: ResourceResult, owner: str) -> ResourceResult:
    return ResourceResult(
        key=result.key,
        status=SyncStatusCode.OUT_OF_SYNC,
        diff=result.diff,
        text_of=result.text_of,
        target=result.target,
        live=result.live,
        conflict_owner=owner,
    )


def _as_version_of(live: Manifest, target: Manifest | None) -> Manifest:
    """The live object read in the target's apiVersion of the same group (Argo CD reads
    live state in the version the manifest uses; the versions of one group mean the same)."""
    if target is None or live.get("apiVersion") == target.get("apiVersion"):
        return live
    live_group = str(live.get("apiVersion") or "").rpartition("/")[0]
    target_group = str(target.get("apiVersion") or "").rpartition("/")[0]
    if live_group != target_group:
        return live
    out: dict[str, Any] = dict(live)
    out["apiVersion"] = target.get("apiVersion")
    return out
