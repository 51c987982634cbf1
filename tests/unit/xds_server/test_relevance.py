"""The relevance tables checked against the generators: for every golden case, removing all
objects of a kind the table says cannot affect a type leaves that type's output unchanged."""

from __future__ import annotations

from typing import Any, cast

import pytest

from meshpilot.config.istio.virtual_service import VirtualService
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_paths
from meshpilot.config.objects import ConfigObject
from meshpilot.model.proxy import ProxyType
from meshpilot.model.push_context import build_push_context
from meshpilot.model.relevance import ALL_TYPES, affected_types, unaffected_kinds
from meshpilot.xds.generate import generate_proxy_config, generator
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.references import rds_names, sds_names
from tests.conftest import proxy_for
from tests.unit.golden.cases import GoldenCase, load_cases

CASES = load_cases()
TYPE_URLS = {
    "cds": TypeUrl.CLUSTER,
    "eds": TypeUrl.ENDPOINT,
    "lds": TypeUrl.LISTENER,
    "rds": TypeUrl.ROUTE,
    "sds": TypeUrl.SECRET,
    "ecds": TypeUrl.EXTENSION_CONFIG,
}


def _http_only(obj: ConfigObject[Any]) -> bool:
    if obj.key.kind is not Kind.VIRTUAL_SERVICE:
        return False
    spec = cast(VirtualService, obj.model).spec
    return not (spec.tcp or spec.tls)


def _output(objects: list[ConfigObject[Any]], case: GoldenCase, short: str) -> list[bytes]:
    loaded = load_paths(case.inputs)
    push = build_push_context(objects, loaded.mesh)
    proxy = proxy_for(push, case.proxy, case.proxy_type)
    full = generate_proxy_config(build_push_context(loaded.objects, loaded.mesh), proxy)
    names = {
        "cds": None,
        "lds": None,
        "eds": {c.eds_cluster_config.service_name or c.name for c in full.clusters},
        "rds": rds_names(full.listeners),
        "sds": sds_names(full.listeners, full.clusters),
        "ecds": None,
    }[short]
    msgs = generator(TYPE_URLS[short], proxy.type)(push, proxy, names)
    return [m.SerializeToString(deterministic=True) for m in msgs]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_unaffected_kinds_leave_the_type_unchanged(case: GoldenCase) -> None:
    objects = load_paths(case.inputs).objects
    checked = 0
    for short in sorted(ALL_TYPES):
        baseline = _output(list(objects), case, short)
        skip = unaffected_kinds(case.proxy_type, short)
        for kind in sorted(skip & {o.key.kind for o in objects}):
            kept = [o for o in objects if o.key.kind is not kind]
            assert _output(kept, case, short) == baseline, f"{kind} changed {short}"
            checked += 1
        if short == "lds" and case.proxy_type is ProxyType.SIDECAR:
            kept = [o for o in objects if not _http_only(o)]
            assert _output(kept, case, short) == baseline, "HTTP-only VirtualServices changed lds"
    assert checked or not objects


def test_affected_types_tables() -> None:
    vs = ConfigKey(Kind.VIRTUAL_SERVICE, "default", "web")
    assert affected_types(ProxyType.SIDECAR, [vs], {}, {}) == {"rds"}
    assert affected_types(ProxyType.ROUTER, [vs], {}, {}) == {"lds", "rds"}
    secret = ConfigKey(Kind.SECRET, "default", "cert")
    assert affected_types(ProxyType.SIDECAR, [secret], {}, {}) == {"sds"}
    # A kind the tables do not know about affects everything.
    proxy_config = ConfigKey(Kind.CONFIG_MAP, "default", "settings")
    assert affected_types(ProxyType.SIDECAR, [proxy_config], {}, {}) == ALL_TYPES
    # Extension configs come from WasmPlugins and EnvoyFilters only; WasmPlugins reach
    # listeners (the filters naming them) and ECDS, nothing else.
    policy = ConfigKey(Kind.PEER_AUTHENTICATION, "default", "strict")
    assert affected_types(ProxyType.SIDECAR, [policy], {}, {}) == ALL_TYPES - {"ecds"}
    wasm = ConfigKey(Kind.WASM_PLUGIN, "default", "stats")
    assert affected_types(ProxyType.SIDECAR, [wasm], {}, {}) == {"lds", "ecds"}
    assert affected_types(ProxyType.ROUTER, [wasm], {}, {}) == {"lds", "ecds"}
    assert affected_types(ProxyType.SIDECAR, [], {}, {}) == ALL_TYPES
