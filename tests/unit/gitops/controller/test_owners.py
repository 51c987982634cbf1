"""Which apps own a live object: the tracking annotation's app name resolved by lookup."""

from __future__ import annotations

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.gitops.controller.owners import OwnerIndex, apps_tracked_as
from meshpilot.gitops.model import Application
from meshpilot.gitops.refresh import tracking_name
from tests.unit.gitops.controller.env import app_manifest


def _app(name: str, namespace: str) -> Application:
    manifest = app_manifest("/repo", name)
    manifest["metadata"]["namespace"] = namespace
    return Application.model_validate(manifest)


APPS = {
    ConfigKey(Kind.APPLICATION, "argocd", "shop"): _app("shop", "argocd"),
    ConfigKey(Kind.APPLICATION, "team-a", "shop"): _app("shop", "team-a"),
    ConfigKey(Kind.APPLICATION, "team-a", "cart"): _app("cart", "team-a"),
}


def test_each_app_is_found_by_its_own_tracking_name_and_only_by_it() -> None:
    for key, app in APPS.items():
        name = tracking_name(app, "argocd")
        assert apps_tracked_as(name, "argocd", APPS.get) == [key]


def test_names_of_no_app_find_nothing() -> None:
    for name in ("cart", "team-b_shop", "argocd_shop", "team-a_", "_shop", ""):
        assert apps_tracked_as(name, "argocd", APPS.get) == []


def test_the_control_namespace_decides_which_names_are_prefixed() -> None:
    key = ConfigKey(Kind.APPLICATION, "team-a", "cart")
    assert apps_tracked_as("cart", "team-a", APPS.get) == [key]
    assert apps_tracked_as("team-a_cart", "team-a", APPS.get) == []


def test_owner_index_follows_each_comparison_and_forgets_empty_entries() -> None:
    index = OwnerIndex()
    a, b = (ConfigKey(Kind.APPLICATION, "argocd", n) for n in ("a", "b"))
    vs, svc = (ConfigKey(k, "shop", "reviews") for k in (Kind.VIRTUAL_SERVICE, Kind.SERVICE))
    index.update(a, frozenset(), frozenset({vs, svc}))
    index.update(b, frozenset(), frozenset({vs}))
    assert index.of(vs) == {a, b} and index.of(svc) == {a}
    index.update(a, frozenset({vs, svc}), frozenset({svc}))
    assert index.of(vs) == {b} and index.of(svc) == {a}
    index.update(b, frozenset({vs}), frozenset())
    assert index.of(vs) == set() and vs not in index._owners
