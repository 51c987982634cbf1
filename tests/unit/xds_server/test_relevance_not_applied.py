"""Kinds validated but not applied yet (ProxyConfig, WorkloadGroup) reach no generator:
adding them to a golden case leaves every xDS type's output byte for byte the same, and a
change of them affects no type. (The fixture also holds EnvoyFilter, Telemetry and
WasmPlugin, which are applied since and left out here.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import NOT_APPLIED_KINDS
from meshpilot.config.loader import load_paths
from meshpilot.config.objects import ConfigObject
from meshpilot.model.proxy import ProxyType
from meshpilot.model.relevance import ALL_TYPES, affected_types
from tests.unit.golden.cases import GoldenCase, load_cases
from tests.unit.xds_server.test_relevance import _output

FIXTURE = Path(__file__).parents[1] / "validation/fixtures/valid-istio-extension-kinds.yaml"
CASES = load_cases()


def _not_applied() -> list[ConfigObject[Any]]:
    """The fixture's objects of kinds not applied yet (it holds applied ones too)."""
    return [o for o in load_paths([FIXTURE]).objects if o.key.kind in NOT_APPLIED_KINDS]


def test_the_fixture_holds_every_kind_not_applied_yet() -> None:
    assert {o.key.kind for o in _not_applied()} == NOT_APPLIED_KINDS


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_objects_of_these_kinds_leave_the_output_unchanged(case: GoldenCase) -> None:
    objects = load_paths(case.inputs).objects
    extra = _not_applied()
    for short in sorted(ALL_TYPES):
        with_them = _output([*objects, *extra], case, short)
        assert with_them == _output(list(objects), case, short), short


def test_a_change_of_these_kinds_affects_no_type() -> None:
    for kind in NOT_APPLIED_KINDS:
        key = ConfigKey(kind, "default", "x")
        for proxy_type in (ProxyType.SIDECAR, ProxyType.ROUTER):
            assert affected_types(proxy_type, [key], {}, {}) == frozenset()
