"""Everything `translate` emits for the golden inputs is accepted by the real Envoy."""

from __future__ import annotations

import pytest

from meshpilot.envoy.validate import validate_config
from meshpilot.xds.generate import generate_proxy_config
from tests.conftest import proxy_for, push_from_paths
from tests.unit.golden.cases import GoldenCase, load_cases
from tests.wasm_module import golden_module

CASES = load_cases()


@pytest.mark.envoy
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_envoy_accepts_generated_config(case: GoldenCase) -> None:
    golden_module()  # the WasmPlugin case's file:// module: Envoy's validation loads it
    _, push = push_from_paths(case.inputs)
    proxy = proxy_for(push, case.proxy, case.proxy_type)
    validate_config(generate_proxy_config(push, proxy), node_id=proxy.node_id)
