"""Kinds validated but not applied yet (Telemetry, WasmPlugin, ProxyConfig, WorkloadGroup;
the fixture's EnvoyFilter is applied since and left out here) reach no generator: adding
them to a golden case leaves every xDS type's output byte for byte the same, and a change of
them affects no type."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import NOT_APPLIED_KINDS, Kind
from meshpilot.config.loader import load_paths
from meshpilot.model.proxy import ProxyType
from meshpilot.model.relevance import ALL_TYPES, affected_types
from tests.unit.golden.cases import GoldenCase, load_cases
from tests.unit.xds_server.test_relevance import _output

FIXTURE = Path(__file__).parents[1] / "validation/fixtures/valid-istio-extension-kinds.yaml"
CASES = load_cases()


def test_the_fixture_holds_every_kind_not_applied_yet() -> None:
    kinds = {o.key.kind for o in load_paths([FIXTURE]).objects}
    assert kinds == NOT_APPLIED_KINDS | {Kind.ENVOY_FILTER}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_objects_of_these_kinds_leave_the_output_unchanged(case: GoldenCase) -> None:
    objects = load_paths(case.inputs).objects
    extra = [o for o in load_paths([FIXTURE]).objects if o.key.kind in NOT_APPLIED_KINDS]
    for short in sorted(ALL_TYPES):
        with_them = _output([*objects, *extra], case, short)
        assert with_them == _output(list(objects), case, short), short


def test_a_change_of_these_kinds_affects_no_type() -> None:
    for kind in NOT_APPLIED_KINDS:
        key = ConfigKey(kind, "default", "x")
        for proxy_type in (ProxyType.SIDECAR, ProxyType.ROUTER):
            assert affected_types(proxy_type, [key], {}, {}) == frozenset()
