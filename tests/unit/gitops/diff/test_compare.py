"""Comparison of target and live: pairing, status, ownership, conflicts, masked diffs."""

from __future__ import annotations

import base64
import copy
from typing import Any

from meshpilot.gitops.diff import (
    TRACKING_ANNOTATION,
    ResourceKey,
    compare_app,
    owner_of,
    tracking_id,
)
from meshpilot.gitops.diff.tracking import parse_tracking_id, with_tracking
from meshpilot.gitops.model.status import ConditionType, SyncStatusCode

SVC_KEY = ResourceKey("", "Service", "shop", "reviews")


def _svc(port: int = 9080, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "reviews"}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"ports": [{"port": port}]},
    }


def _live(obj: dict[str, Any], app: str = "shop-app", key: ResourceKey = SVC_KEY) -> dict[str, Any]:
    """What the store holds after `app` synced `obj`, plus server-owned fields."""
    out = with_tracking(obj, app, key)
    out["metadata"]["namespace"] = key.namespace or None
    out["metadata"]["resourceVersion"] = "7"
    return out


def test_tracking_id_is_argo_cds_format_and_round_trips() -> None:
    key = ResourceKey("networking.istio.io", "VirtualService", "shop", "reviews")
    value = tracking_id("shop-app", key)
    assert value == "shop-app:networking.istio.io/VirtualService:shop/reviews"
    assert tracking_id("a", ResourceKey("", "Namespace", "", "shop")) == "a:/Namespace:/shop"
    parsed = parse_tracking_id(value)
    assert parsed is not None and parsed.app == "shop-app" and parsed.key == key
    assert parse_tracking_id("shop-app") is None


def test_copied_object_is_not_owned() -> None:
    live = _live(_svc(), key=SVC_KEY)
    live["metadata"]["name"] = "copy-of-reviews"
    assert owner_of(live) is None
    assert owner_of(_live(_svc())) == "shop-app"


def test_synced_when_live_is_what_sync_wrote() -> None:
    result = compare_app("shop-app", [_svc()], [_live(_svc())], namespace="shop")
    assert result.status is SyncStatusCode.SYNCED
    (res,) = result.resources
    assert res.key == SVC_KEY and res.status is SyncStatusCode.SYNCED and res.text == ""


def test_changed_field_is_out_of_sync_with_a_unified_diff() -> None:
    result = compare_app("shop-app", [_svc(9081)], [_live(_svc())], namespace="shop")
    (res,) = result.resources
    assert result.status is SyncStatusCode.OUT_OF_SYNC
    assert "--- live/Service/shop/reviews\n+++ target/Service/shop/reviews\n" in res.text
    assert "-  - port: 9080\n" in res.text and "+  - port: 9081\n" in res.text
    assert result.diff_text().startswith("===== /Service shop/reviews ======\n")


def test_missing_resource() -> None:
    result = compare_app("shop-app", [_svc()], [], namespace="shop")
    (res,) = result.resources
    assert res.missing and res.live is None and res.status is SyncStatusCode.OUT_OF_SYNC
    assert res.target is not None
    assert res.target["metadata"]["annotations"][TRACKING_ANNOTATION] == tracking_id(
        "shop-app", SVC_KEY
    )


def test_untracked_live_object_is_adopted_on_sync() -> None:
    """Same content, but nothing tracks it yet: out of sync until sync writes the annotation."""
    live = _svc(namespace="shop")
    (res,) = compare_app("shop-app", [_svc()], [live], namespace="shop").resources
    assert res.status is SyncStatusCode.OUT_OF_SYNC and not res.conflict_owner
    assert f"+    {TRACKING_ANNOTATION}: shop-app:/Service:shop/reviews" in res.text


def test_live_only_objects_of_this_app_require_pruning_others_are_ignored() -> None:
    ours = _live(_svc(), key=SVC_KEY)
    other_key = ResourceKey("", "Service", "shop", "ratings")
    theirs = _live({**_svc(), "metadata": {"name": "ratings"}}, app="other-app", key=other_key)
    untracked = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "shop"},
    }
    result = compare_app("shop-app", [], [ours, theirs, untracked], namespace="shop")
    (res,) = result.resources
    assert res.key == SVC_KEY and res.requires_pruning
    assert res.status is SyncStatusCode.OUT_OF_SYNC and result.status is SyncStatusCode.OUT_OF_SYNC
    assert "-kind: Service" in res.text


def test_ignore_extraneous_keeps_the_app_synced() -> None:
    ours = _live(_svc())
    ours["metadata"]["annotations"]["argocd.argoproj.io/compare-options"] = "IgnoreExtraneous"
    result = compare_app("shop-app", [], [ours], namespace="shop")
    assert result.resources[0].requires_pruning and result.status is SyncStatusCode.SYNCED


def test_object_of_another_app_is_a_conflict() -> None:
    result = compare_app("shop-app", [_svc()], [_live(_svc(), app="billing")], namespace="shop")
    (res,) = result.resources
    assert res.conflict_owner == "billing" and res.status is SyncStatusCode.OUT_OF_SYNC
    (condition,) = result.conditions
    assert condition.type is ConditionType.SHARED_RESOURCE_WARNING
    assert condition.message == "Service/reviews is part of applications billing and shop-app"


def test_repeated_resource_warning() -> None:
    result = compare_app("shop-app", [_svc(), _svc(9081)], [], namespace="shop")
    assert [c.type for c in result.conditions] == [ConditionType.REPEATED_RESOURCE_WARNING]
    assert "appeared 2 times" in result.conditions[0].message


def test_hooks_are_not_compared() -> None:
    hook = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "generateName": "migrate-",
            "annotations": {"argocd.argoproj.io/hook": "PreSync"},
        },
    }
    result = compare_app("shop-app", [hook, _svc()], [_live(_svc())], namespace="shop")
    assert [r.key for r in result.resources] == [SVC_KEY]
    assert result.hooks == (hook,) and result.status is SyncStatusCode.SYNCED


def test_live_apiversion_of_the_same_group_compares_equal() -> None:
    key = ResourceKey("networking.istio.io", "DestinationRule", "shop", "reviews")
    dr = {
        "apiVersion": "networking.istio.io/v1",
        "kind": "DestinationRule",
        "metadata": {"name": "reviews"},
        "spec": {"host": "reviews"},
    }
    live = _live({**dr, "apiVersion": "networking.istio.io/v1alpha3"}, key=key)
    assert compare_app("shop-app", [dr], [live], namespace="shop").status is SyncStatusCode.SYNCED


SECRET_KEY = ResourceKey("", "Secret", "shop", "db")
PLAIN_OLD, PLAIN_NEW, PLAIN_SAME = "old-pa55word-1234", "n3w-pa55word-5678", "same-user-name"


def _secret(password: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "namespace": "shop"},
        "stringData": {"password": password, "user": PLAIN_SAME},
    }


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_secret_diff_is_masked_and_never_shows_a_value() -> None:
    live = _live(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "db",
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": _b64(PLAIN_OLD)
                },
            },
            "data": {"password": _b64(PLAIN_OLD), "user": _b64(PLAIN_SAME)},
        },
        key=SECRET_KEY,
    )
    result = compare_app("shop-app", [_secret(PLAIN_NEW)], [live], namespace="shop")
    (res,) = result.resources
    assert res.status is SyncStatusCode.OUT_OF_SYNC
    text = result.diff_text()
    # A changed value: different masks on each side, so the change shows; equal ones match.
    assert "-  password: ++++++++\n" not in text
    assert "-  password: +++++++++\n" in text and "+  password: ++++++++\n" in text
    assert "  user: ++++++++\n" in text
    for secret in (PLAIN_OLD, PLAIN_NEW, PLAIN_SAME):
        assert secret not in text and _b64(secret) not in text
        assert secret not in repr(result) and _b64(secret) not in repr(result)


def test_equal_secrets_are_synced_whatever_the_spelling() -> None:
    live = _live(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": "db"},
            "data": {"password": _b64(PLAIN_OLD), "user": _b64(PLAIN_SAME)},
        },
        key=SECRET_KEY,
    )
    result = compare_app("shop-app", [_secret(PLAIN_OLD)], [live], namespace="shop")
    assert result.status is SyncStatusCode.SYNCED and result.diff_text() == ""


def test_compare_does_not_change_its_inputs() -> None:
    target, live = _svc(9081), _live(_svc())
    before = copy.deepcopy((target, live))
    compare_app("shop-app", [target], [live], namespace="shop")
    assert (target, live) == before
