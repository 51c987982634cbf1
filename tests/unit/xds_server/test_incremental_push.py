"""An incrementally built PushContext (only the indexes whose kinds changed, the registry of
the changed Pods' namespaces) equals a full build, and so does every proxy's config."""

from __future__ import annotations

from typing import Any

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_paths, load_text
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.xds.generate import generate_proxy_config
from tests.conftest import REPO, proxy_for

BOOKINFO = REPO / "examples" / "bookinfo"
NEW_POD = """apiVersion: v1
kind: Pod
metadata:
  name: reviews-v2-new
  namespace: default
  labels: {app: reviews, version: v2}
spec: {serviceAccountName: bookinfo-reviews}
status: {podIP: 10.10.0.99}
"""
NEW_VS = """apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: default}
spec:
  hosts: [ratings]
  http:
  - timeout: 3s
    route:
    - destination: {host: ratings}
"""


def _changed(
    before: dict[ConfigKey, ConfigObject[Any]], after: dict[ConfigKey, ConfigObject[Any]]
) -> set[ConfigKey]:
    keys = before.keys() | after.keys()
    return {k for k in keys if before.get(k) is not after.get(k)}


def _check(prev: PushContext, objects: list[ConfigObject[Any]]) -> None:
    before = dict(prev.by_key)
    after = {o.key: o for o in objects}
    incremental = build_push_context(objects, prev.mesh, 2, None, prev, _changed(before, after))
    full = build_push_context(objects, prev.mesh, 2)
    assert incremental.registry == full.registry
    assert dict(incremental.objects) == dict(full.objects)
    assert incremental.virtual_services == full.virtual_services
    assert incremental.destination_rules == full.destination_rules
    for pod in incremental.of_kind(Kind.POD):
        proxy = proxy_for(incremental, f"{pod.name}.{pod.namespace}")
        assert generate_proxy_config(incremental, proxy).to_dict() == (
            generate_proxy_config(full, proxy).to_dict()
        )


@pytest.fixture
def base() -> tuple[PushContext, list[ConfigObject[Any]]]:
    loaded = load_paths([BOOKINFO])
    return build_push_context(loaded.objects, loaded.mesh), list(loaded.objects)


def test_added_pod(base: tuple[PushContext, list[ConfigObject[Any]]]) -> None:
    prev, objects = base
    _check(prev, [*objects, *load_text(NEW_POD).objects])


def test_removed_pod(base: tuple[PushContext, list[ConfigObject[Any]]]) -> None:
    prev, objects = base
    pod = next(o for o in objects if o.key.kind is Kind.POD and o.namespace == "default")
    _check(prev, [o for o in objects if o is not pod])


def test_changed_virtual_service_keeps_the_registry(
    base: tuple[PushContext, list[ConfigObject[Any]]],
) -> None:
    prev, objects = base
    (vs,) = load_text(NEW_VS).objects
    changed = [vs if o.key == vs.key else o for o in objects]
    if vs.key not in prev.by_key:
        changed.append(vs)
    _check(prev, changed)
    after = {o.key: o for o in changed}
    push = build_push_context(changed, prev.mesh, 2, None, prev, {vs.key})
    assert push.registry is prev.registry and push.destination_rules is prev.destination_rules
    assert push.by_key == after


def test_removed_service(base: tuple[PushContext, list[ConfigObject[Any]]]) -> None:
    prev, objects = base
    _check(prev, [o for o in objects if o.key != ConfigKey(Kind.SERVICE, "default", "ratings")])
