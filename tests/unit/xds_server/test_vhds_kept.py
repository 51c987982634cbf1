"""VHDS across pushes: after a VirtualService change the unchanged virtual hosts (and their
wire resources) are the previous push's own objects, the changed one is new, and the result
equals a split made from nothing."""

from __future__ import annotations

from dataclasses import replace

from meshpilot.config.loader import load_text
from meshpilot.model.lasting_memo import LastingMemo
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.xds.generate import generator
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.resources import generate_resources
from tests.conftest import proxy_for
from tests.unit.xds_server.test_vhds import API_VH, APP, WEB_VH, _vs


def _virtual_hosts(push: PushContext) -> dict[str, object]:
    proxy = replace(proxy_for(push, "client.default"), vhds=True)
    made = generator(TypeUrl.VIRTUAL_HOST, proxy.type)(push, proxy, ["8080"])
    return {vh.name: vh for vh in made}


def _resources(push: PushContext) -> dict[str, object]:
    proxy = replace(proxy_for(push, "client.default"), vhds=True)
    made = generate_resources(push, proxy, TypeUrl.VIRTUAL_HOST, ["8080"])
    return {r.name: r for r in made}


def _pushes() -> tuple[PushContext, PushContext]:
    first = load_text(APP + _vs("3s"), "app.yaml")
    objects = {o.key: o for o in first.objects}
    before = build_push_context(list(objects.values()), first.mesh)
    changed = next(o for o in load_text(APP + _vs("5s"), "app.yaml").objects if o.key.name == "web"
                   and o.key.kind == "VirtualService")  # fmt: skip
    objects[changed.key] = changed
    after = build_push_context(
        list(objects.values()), first.mesh, 2, None, before, {changed.key}, objects
    )
    return before, after


def test_unchanged_virtual_hosts_and_resources_are_kept() -> None:
    before, after = _pushes()
    old_hosts, old_resources = _virtual_hosts(before), _resources(before)
    new_hosts, new_resources = _virtual_hosts(after), _resources(after)
    assert set(old_hosts) == set(new_hosts) == {WEB_VH, API_VH}
    assert new_hosts[API_VH] is old_hosts[API_VH]
    assert new_resources[API_VH] is old_resources[API_VH]
    assert new_hosts[WEB_VH] is not old_hosts[WEB_VH]
    assert new_resources[WEB_VH] != old_resources[WEB_VH]


def test_kept_virtual_hosts_equal_a_split_from_nothing() -> None:
    _, after = _pushes()
    _virtual_hosts(after)  # the kept path
    fresh = replace(after, lasting=LastingMemo(), memo={})
    kept = {n: r.body for n, r in _resources(after).items()}  # type: ignore[attr-defined]
    made = {n: r.body for n, r in _resources(fresh).items()}  # type: ignore[attr-defined]
    assert kept == made
