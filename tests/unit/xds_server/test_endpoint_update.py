"""A change of Pods alone updates the previous registry's affected services only
(model/indexes/endpoint_update.py): the result equals a rebuild, unaffected services keep their
very objects (and the sidecar scopes stay), and what it does not model is rebuilt."""

from __future__ import annotations

from typing import Any

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_paths, load_text
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext, build_push_context
from tests.conftest import REPO

BOOKINFO = REPO / "examples" / "bookinfo"


def pod(name: str, labels: str, ip: str, account: str = "bookinfo-reviews") -> ConfigObject[Any]:
    text = f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{{labels}}}}}
spec: {{serviceAccountName: {account}}}
status: {{podIP: {ip}}}
"""
    (obj,) = load_text(text).objects
    return obj


SERVICE_ENTRY = """apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vm-reviews, namespace: default}
spec:
  hosts: [reviews.vm.internal]
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: STATIC
  workloadSelector: {labels: {app: reviews}}
"""


@pytest.fixture
def base() -> tuple[PushContext, list[ConfigObject[Any]]]:
    loaded = load_paths([BOOKINFO])
    return build_push_context(loaded.objects, loaded.mesh), list(loaded.objects)


def _both(
    prev: PushContext, objects: list[ConfigObject[Any]], changed: set[ConfigKey]
) -> tuple[PushContext, PushContext]:
    by_key = {o.key: o for o in objects}
    updated = build_push_context(objects, prev.mesh, 2, None, prev, changed, by_key)
    rebuilt = build_push_context(objects, prev.mesh, 2)
    assert updated.registry == rebuilt.registry
    assert dict(updated.objects) == dict(rebuilt.objects)
    assert dict(updated.by_key) == dict(rebuilt.by_key)
    return updated, rebuilt


def _replace(objects: list[ConfigObject[Any]], new: ConfigObject[Any]) -> list[ConfigObject[Any]]:
    return [new if o.key == new.key else o for o in objects]


def test_added_pod_keeps_other_services_and_scopes(
    base: tuple[PushContext, list[ConfigObject[Any]]],
) -> None:
    prev, objects = base
    prev.default_scope("default")  # a scope memoised before the push
    new = pod("reviews-v2-new", "app: reviews, version: v2", "10.10.0.99")
    updated, _ = _both(prev, [*objects, new], {new.key})
    assert updated.registry.services is prev.registry.services  # same identities: same scopes
    assert updated._scopes == prev._scopes
    ratings = ("ratings.default.svc.cluster.local", "default")
    assert updated.registry.endpoints[ratings] is prev.registry.endpoints[ratings]
    reviews = ("reviews.default.svc.cluster.local", "default")
    assert updated.registry.endpoints[reviews] != prev.registry.endpoints[reviews]


def test_relabelled_pod_moves_between_services(
    base: tuple[PushContext, list[ConfigObject[Any]]],
) -> None:
    prev, objects = base
    old = next(o for o in objects if o.key.kind is Kind.POD and o.labels.get("app") == "reviews")
    moved = pod(old.name, "app: ratings, version: v1", old.model.status.pod_ip, "bookinfo-ratings")
    _both(prev, _replace(objects, moved), {moved.key})


def test_new_service_account_changes_the_service(
    base: tuple[PushContext, list[ConfigObject[Any]]],
) -> None:
    prev, objects = base
    new = pod("reviews-v9", "app: reviews, version: v9", "10.10.0.98", "someone-else")
    updated, _ = _both(prev, [*objects, new], {new.key})
    assert updated.registry.services != prev.registry.services


def test_removed_pods(base: tuple[PushContext, list[ConfigObject[Any]]]) -> None:
    prev, objects = base
    gone = {o.key for o in objects if o.key.kind is Kind.POD and o.namespace == "default"}
    _both(prev, [o for o in objects if o.key not in gone], gone)


def test_pod_selected_by_a_service_entry_is_rebuilt() -> None:
    loaded = load_paths([BOOKINFO])
    objects = [*loaded.objects, *load_text(SERVICE_ENTRY).objects]
    prev = build_push_context(objects, loaded.mesh)
    new = pod("reviews-v2-new", "app: reviews, version: v2", "10.10.0.99")
    updated, _ = _both(prev, [*objects, new], {new.key})
    host = ("reviews.vm.internal", "default")
    assert updated.registry.endpoints[host] != prev.registry.endpoints[host]
