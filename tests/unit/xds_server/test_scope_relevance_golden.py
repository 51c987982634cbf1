"""Scope relevance and route carry-over checked against the generators on every golden case:
removing one VirtualService or DestinationRule either leaves a proxy's whole configuration
byte for byte the same, or `sees_hosts` says the proxy sees it; and route configs carried
over from the previous push (after a VirtualService or an endpoint change), or edited from
it after a VirtualService's routes alone changed (xds/route_edits.py), equal a cold build of
the new one, whole and split for VHDS."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import ENDPOINT_KINDS, Kind
from meshpilot.config.loader import load_paths
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.model.relevance import named_hosts, sees_hosts
from meshpilot.xds.cache import carry_over
from meshpilot.xds.generate import generate_proxy_config
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.references import rds_names
from meshpilot.xds.resources import generate_resources
from tests.conftest import proxy_for
from tests.unit.golden.cases import GoldenCase, load_cases

CASES = load_cases()
_SCOPED = (Kind.VIRTUAL_SERVICE, Kind.DESTINATION_RULE)


def _dump(objects: list[ConfigObject[Any]], case: GoldenCase) -> dict[str, Any]:
    mesh = load_paths(case.inputs).mesh
    push = build_push_context(objects, mesh)
    return generate_proxy_config(push, proxy_for(push, case.proxy, case.proxy_type)).to_dict()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_unseen_hosts_leave_the_proxy_unchanged(case: GoldenCase) -> None:
    loaded = load_paths(case.inputs)
    objects = list(loaded.objects)
    push = build_push_context(objects, loaded.mesh)
    proxy = proxy_for(push, case.proxy, case.proxy_type)
    baseline = _dump(objects, case)
    for obj in (o for o in objects if o.key.kind in _SCOPED):
        kept = [o for o in objects if o.key != obj.key]
        after = build_push_context(kept, loaded.mesh)
        hosts = named_hosts([obj.key], push.by_key, after.by_key, push.domain_suffix)
        if hosts is None or sees_hosts(after, proxy, hosts):
            continue
        assert _dump(kept, case) == baseline, f"{obj.key} changed {case.proxy} unseen"


def _routes(push: Any, proxy: Any, names: set[str]) -> dict[str, bytes]:
    return {r.name: r.body for r in generate_resources(push, proxy, TypeUrl.ROUTE, names)}


def _vhds_routes(push: Any, proxy: Any, names: set[str]) -> dict[str, bytes]:
    heads = _routes(push, proxy, names)
    hosts = generate_resources(push, proxy, TypeUrl.VIRTUAL_HOST, names)
    return heads | {r.name: r.body for r in hosts}


@dataclass(frozen=True)
class _Carried:
    before: PushContext
    after: PushContext
    carried: int  # route configs carry_over seeded the new push with
    names: set[str]  # the proxy's route config names


def _carry_and_compare(
    case: GoldenCase,
    objects: list[ConfigObject[Any]],
    changed: list[ConfigObject[Any]],
    key: ConfigKey,
    vhds: bool = False,
) -> _Carried:
    """The proxy's route configs cached in a push of `objects`, then carried over (or
    edited) into the push of `changed` (`key` changed), equal a cold build of `changed`,
    whole or (`vhds`) split into virtual hosts."""
    mesh = load_paths(case.inputs).mesh
    get = _vhds_routes if vhds else _routes

    def proxy_in(push: PushContext) -> Any:
        return replace(proxy_for(push, case.proxy, case.proxy_type), vhds=vhds)

    before = build_push_context(objects, mesh, 1)
    names = rds_names(generate_proxy_config(before, proxy_in(before)).listeners)
    get(before, proxy_in(before), names)  # fills the cache
    after = build_push_context(changed, mesh, 2, None, before, {key})
    carried = carry_over(before, after, {key})
    cold = build_push_context(changed, mesh, 3)
    assert get(after, proxy_in(after), names) == get(cold, proxy_in(cold), names), (key, vhds)
    return _Carried(before, after, carried, names)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_carried_route_configs_equal_a_cold_build(case: GoldenCase) -> None:
    objects = list(load_paths(case.inputs).objects)
    if case.proxy_type is not case.proxy_type.SIDECAR:
        pytest.skip("only sidecar route configs carry over")
    for obj in (o for o in objects if o.key.kind is Kind.VIRTUAL_SERVICE):
        _carry_and_compare(case, objects, [o for o in objects if o.key != obj.key], obj.key)


def _retimed(obj: ConfigObject[Any]) -> ConfigObject[Any]:
    """The VirtualService with a new timeout on every HTTP route: its routes alone change."""
    spec = obj.model.spec
    http = [r.model_copy(update={"timeout": 7_000_000_000}) for r in spec.http]
    model = obj.model.model_copy(update={"spec": spec.model_copy(update={"http": http})})
    return replace(obj, model=model)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_route_edits_equal_a_cold_build(case: GoldenCase) -> None:
    objects = list(load_paths(case.inputs).objects)
    if case.proxy_type is not case.proxy_type.SIDECAR:
        pytest.skip("only sidecar route configs carry over")
    for obj in (o for o in objects if o.key.kind is Kind.VIRTUAL_SERVICE):
        edited = [_retimed(o) if o.key == obj.key else o for o in objects]
        for vhds in (False, True):
            _carry_and_compare(case, objects, edited, obj.key, vhds)


def _relabeled(obj: ConfigObject[Any]) -> ConfigObject[Any]:
    """The object with one more label (a Pod: its proxy's class may change)."""
    meta = obj.model.metadata
    labels = {**meta.labels, "rollout": "canary"}
    model = obj.model.model_copy(update={"metadata": meta.model_copy(update={"labels": labels})})
    return replace(obj, model=model)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_route_configs_carried_after_endpoint_changes_equal_a_cold_build(
    case: GoldenCase,
) -> None:
    """Each Pod, Endpoints, EndpointSlice or WorkloadEntry removed, or relabeled: route
    configs carried over (xds/cache.py) equal a cold build."""
    objects = list(load_paths(case.inputs).objects)
    if case.proxy_type is not case.proxy_type.SIDECAR:
        pytest.skip("only sidecar route configs carry over")
    own = case.proxy.partition(".")
    for obj in (o for o in objects if o.key.kind in ENDPOINT_KINDS):
        if (obj.name, obj.namespace or "default") == (own[0], own[2] or "default"):
            continue  # the proxy's own pod: its config is built for its new self anyway
        for changed in (
            [o for o in objects if o is not obj],
            [_relabeled(o) if o is obj else o for o in objects],
        ):
            carried = _carry_and_compare(case, objects, changed, obj.key)
            same_services = carried.before.registry.services == carried.after.registry.services
            if carried.names and same_services:  # (else nothing would be checked)
                assert carried.carried == len(carried.names), obj.key
