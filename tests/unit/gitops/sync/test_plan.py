"""plan_sync: tasks, phases, waves and kind order for realistic apps, hooks, prune, conflicts."""

from __future__ import annotations

from typing import Any

from meshpilot.gitops.diff import parse_ignore_differences
from meshpilot.gitops.sync import (
    HookDeletePolicy,
    SyncAction,
    SyncPhase,
    SyncPlan,
    SyncRequest,
    parse_sync_options,
    plan_sync,
    render_plan,
)
from tests.unit.gitops.sync.app import SECRET_VALUE, manifest, shop_app, synced

REQUEST = SyncRequest(app="shop-app", namespace="shop")


def _order(plan: SyncPlan) -> list[tuple[str, int, str, str, str]]:
    return [(t.phase, t.wave, t.action, t.key.kind, t.key.name) for t in plan.tasks]


def test_realistic_app_is_ordered_by_wave_then_kind() -> None:
    plan = plan_sync(shop_app(), [], REQUEST)
    assert plan.runnable and not plan.notes
    assert _order(plan) == [
        # The Namespace moves before the first object in it, taking its wave.
        ("Sync", -1, "create", "Namespace", "shop"),
        ("Sync", -1, "create", "Secret", "shop-tls"),
        ("Sync", 0, "create", "Service", "reviews"),
        ("Sync", 0, "create", "ServiceEntry", "payments"),
        ("Sync", 0, "create", "DestinationRule", "reviews"),
        ("Sync", 0, "create", "Gateway", "shop-gateway"),
        ("Sync", 1, "create", "VirtualService", "reviews"),
    ]
    assert [(w.phase, w.wave, len(w.tasks)) for w in plan.waves] == [
        ("Sync", -1, 2),
        ("Sync", 0, 4),
        ("Sync", 1, 1),
    ]


def test_kind_order_in_one_wave_puts_referenced_mesh_objects_first() -> None:
    objs = [{**o, "metadata": {"name": o["metadata"]["name"]}} for o in shop_app()]
    kinds = [t.key.kind for t in plan_sync(objs, [], REQUEST).tasks]
    assert kinds == [
        "Namespace",
        "Secret",
        "Service",
        "ServiceEntry",
        "DestinationRule",
        "Gateway",
        "VirtualService",
    ]


def test_in_sync_app_plans_unchanged_or_skips_with_apply_out_of_sync_only() -> None:
    live = synced(shop_app())
    plan = plan_sync(shop_app(), live, REQUEST)
    assert {t.action for t in plan.tasks} == {SyncAction.UNCHANGED}
    options = parse_sync_options(["ApplyOutOfSyncOnly=true"])
    changed = shop_app()
    changed[0]["spec"] = {"hosts": ["reviews", "reviews.shop"]}
    plan = plan_sync(changed, live, SyncRequest("shop-app", "shop", options=options))
    actions = {t.key.kind: (t.action, t.message) for t in plan.tasks}
    assert actions["VirtualService"] == (SyncAction.UPDATE, "configured")
    assert actions["Service"] == (SyncAction.SKIP, "in sync (ApplyOutOfSyncOnly=true)")


def _hook(name: str, hook: str, **annotations: str) -> dict[str, Any]:
    job = manifest("batch/v1", "Job", name, spec={"template": {}})
    job["metadata"]["annotations"] = {"argocd.argoproj.io/hook": hook, **annotations}
    return job


def test_hooks_run_in_their_phases() -> None:
    targets = [
        manifest("v1", "Service", "reviews"),
        _hook("migrate", "PreSync", **{"argocd.argoproj.io/hook-delete-policy": "HookSucceeded"}),
        _hook("smoke", "Sync,PostSync", **{"argocd.argoproj.io/sync-wave": "2"}),
        _hook("page-oncall", "SyncFail"),
        _hook("never", "Skip"),
        {
            **manifest("batch/v1", "Job", "helm-pre"),
            "metadata": {
                "name": "helm-pre",
                "annotations": {"helm.sh/hook": "pre-install", "helm.sh/hook-weight": "-5"},
            },
        },
    ]
    plan = plan_sync(targets, [], REQUEST)
    assert _order(plan) == [
        ("PreSync", -5, "create", "Job", "helm-pre"),
        ("PreSync", 0, "create", "Job", "migrate"),
        ("Sync", 0, "create", "Service", "reviews"),
        ("Sync", 2, "create", "Job", "smoke"),
        ("PostSync", 2, "create", "Job", "smoke"),
    ]
    migrate = plan.tasks[1]
    assert migrate.hook and migrate.delete_policies == {HookDeletePolicy.HOOK_SUCCEEDED}
    assert plan.tasks[3].delete_policies == {HookDeletePolicy.BEFORE_HOOK_CREATION}
    assert [(t.phase, t.key.name) for t in plan.on_fail] == [(SyncPhase.SYNC_FAIL, "page-oncall")]
    # Hooks are not compared: they never make the app OutOfSync.
    assert plan.comparison is not None
    assert [r.key.kind for r in plan.comparison.resources] == ["Service"]


def test_bad_annotations_are_problems_naming_the_object() -> None:
    targets = [manifest("v1", "Service", "reviews", spec={}), _hook("x", "Later")]
    targets[0]["metadata"]["annotations"] = {"argocd.argoproj.io/sync-wave": "first"}
    plan = plan_sync(targets, [], REQUEST)
    assert not plan.runnable
    assert plan.problems == (
        "Service/shop/reviews: argocd.argoproj.io/sync-wave: 'first' is not an integer",
        "batch/Job/shop/x: argocd.argoproj.io/hook: unknown hook 'Later' "
        "(known: PreSync, Sync, PostSync, SyncFail, Skip)",
    )


def _stale() -> list[dict[str, Any]]:
    """The store holds the app plus two objects since removed from Git."""
    old_vs = manifest("networking.istio.io/v1", "VirtualService", "old", 1)
    old_cm = manifest("v1", "ConfigMap", "old-settings", -1)
    return synced([*shop_app(), old_vs, old_cm])


def test_prune_needs_permission() -> None:
    plan = plan_sync(shop_app(), _stale(), REQUEST)
    skipped = {t.key.name: t.message for t in plan.tasks if t.action is SyncAction.SKIP}
    assert skipped == {
        "old": "ignored (requires pruning)",
        "old-settings": "ignored (requires pruning)",
    }


def test_prune_runs_in_reverse_wave_order_and_prune_last_after_everything() -> None:
    plan = plan_sync(shop_app(), _stale(), SyncRequest("shop-app", "shop", prune=True))
    prunes = [(t.wave, t.key.name) for t in plan.tasks if t.is_prune]
    # Created in waves -1 (ConfigMap) and 1 (VirtualService): deleted in the mirrored waves.
    assert prunes == [(-1, "old"), (1, "old-settings")]
    options = parse_sync_options(["PruneLast=true"])
    plan = plan_sync(
        shop_app(), _stale(), SyncRequest("shop-app", "shop", prune=True, options=options)
    )
    assert [t.key.name for t in plan.waves[-1].tasks] == ["old-settings", "old"]
    assert plan.waves[-1].wave == 2 and all(t.is_prune for t in plan.waves[-1].tasks)


def test_prune_false_annotation_keeps_the_object() -> None:
    live = _stale()
    live[-1]["metadata"]["annotations"]["argocd.argoproj.io/sync-options"] = "Prune=false"
    plan = plan_sync(shop_app(), live, SyncRequest("shop-app", "shop", prune=True))
    task = next(t for t in plan.tasks if t.key.name == "old-settings")
    assert (task.action, task.message) == (SyncAction.SKIP, "ignored (no prune)")


def test_object_of_another_app_is_never_overwritten() -> None:
    live = synced(shop_app()[:1], app="billing") + synced(shop_app()[1:])
    plan = plan_sync(shop_app(), live, REQUEST)
    vs = next(t for t in plan.tasks if t.key.kind == "VirtualService")
    assert (vs.action, vs.message) == (
        SyncAction.SKIP,
        "shared with application billing: not overwritten",
    )
    assert plan.runnable
    strict = SyncRequest(
        "shop-app", "shop", options=parse_sync_options(["FailOnSharedResource=true"])
    )
    plan = plan_sync(shop_app(), live, strict)
    assert plan.problems == (
        "VirtualService/reviews is part of applications billing and shop-app: "
        "FailOnSharedResource=true",
    )


def test_create_namespace() -> None:
    targets = [manifest("v1", "Service", "reviews", 2)]
    options = parse_sync_options(["CreateNamespace=true"])
    plan = plan_sync(targets, [], SyncRequest("shop-app", "shop", options=options))
    assert _order(plan) == [
        # Already before the Service: it keeps its own wave (gitops-engine adjustDeps).
        ("Sync", 0, "create", "Namespace", "shop"),
        ("Sync", 2, "create", "Service", "reviews"),
    ]
    assert plan.tasks[0].message == "CreateNamespace=true"
    existing = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}]
    plan = plan_sync(targets, existing, SyncRequest("shop-app", "shop", options=options))
    assert [t.key.kind for t in plan.tasks] == ["Service"]


def test_selective_sync_runs_only_the_named_resources_and_no_hooks() -> None:
    plan = plan_sync(shop_app(), [], REQUEST)
    vs = next(t.key for t in plan.tasks if t.key.kind == "VirtualService")
    targets = [*shop_app(), _hook("migrate", "PreSync")]
    plan = plan_sync(targets, [], SyncRequest("shop-app", "shop", only=frozenset({vs})))
    assert [t.key for t in plan.tasks] == [vs]


def test_respect_ignore_differences_keeps_live_values() -> None:
    target = manifest("apps/v1", "Deployment", "reviews", spec={"replicas": 1, "paused": False})
    (live,) = synced([{**target, "spec": {"replicas": 5, "paused": True}}])
    ignore = parse_ignore_differences(
        [{"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"]}]
    )
    options = parse_sync_options(["RespectIgnoreDifferences=true"])
    plan = plan_sync(
        [target], [live], SyncRequest("shop-app", "shop", options=options, ignore=ignore)
    )
    (task,) = plan.tasks
    assert task.action is SyncAction.UPDATE and task.target is not None
    assert task.target["spec"] == {"replicas": 5, "paused": False}
    plain = plan_sync([target], [live], SyncRequest("shop-app", "shop", ignore=ignore))
    assert plain.tasks[0].target is not None and plain.tasks[0].target["spec"]["replicas"] == 1


def test_dry_run_rendering_names_every_task_and_no_secret_value() -> None:
    options = parse_sync_options(["ServerSideApply=true"])
    plan = plan_sync(
        shop_app(),
        _stale(),
        SyncRequest("shop-app", "shop", prune=True, dry_run=True, options=options),
    )
    text = render_plan(plan)
    lines = text.splitlines()
    assert lines[0] == "Sync plan for application shop-app (dry run): 9 tasks in 3 waves"
    assert lines[1].split() == [
        "PHASE",
        "WAVE",
        "ACTION",
        "GROUP",
        "KIND",
        "NAMESPACE",
        "NAME",
        "MESSAGE",
    ]
    assert lines[2].split() == ["Sync", "-1", "unchanged", "Namespace", "shop", "unchanged"]
    assert any(line.split()[:3] == ["Sync", "-1", "prune"] for line in lines)
    assert lines[-1] == (
        "note: ServerSideApply=true has no effect: the store replaces whole objects "
        "and keeps no field managers"
    )
    assert SECRET_VALUE not in text and SECRET_VALUE not in repr(plan)
