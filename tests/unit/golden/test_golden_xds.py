"""Generated Envoy configuration compared with reviewed golden files.

Refresh with `REFRESH_GOLDEN=1 pytest tests/unit/golden`, then read the diff.
"""

from __future__ import annotations

import os

import pytest

from meshpilot.xds.cache import cache_for
from meshpilot.xds.generate import generate_proxy_config
from meshpilot.xds.output import ProxyConfig
from meshpilot.xds.references import rds_names
from tests.conftest import proxy_for, push_from_paths
from tests.unit.golden.cases import (
    CASES_DIR,
    OPTIONAL_SECTIONS,
    SECTIONS,
    GoldenCase,
    dump,
    load_cases,
)

CASES = load_cases()
REFRESH = os.environ.get("REFRESH_GOLDEN") == "1"


def _generate(case: GoldenCase) -> ProxyConfig:
    loaded, push = push_from_paths(case.inputs)
    assert not loaded.errors, [str(d) for d in loaded.errors]
    return generate_proxy_config(push, proxy_for(push, case.proxy, case.proxy_type))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matches_golden(case: GoldenCase) -> None:
    output = _generate(case).to_dict()
    mismatched = []
    for short, section in SECTIONS.items():
        text = dump(output[section])
        path = case.golden(short)
        if REFRESH:
            path.write_text(text)
            continue
        assert path.exists(), f"{path} missing: run with REFRESH_GOLDEN=1 and review it"
        if path.read_text() != text:
            mismatched.append(short)
    for short, section in OPTIONAL_SECTIONS.items():
        path = case.golden(short)
        text = dump(output.get(section, []))
        if REFRESH and section in output:
            path.write_text(text)
        elif (path.exists() and path.read_text() != text) or (
            not path.exists() and section in output
        ):
            mismatched.append(short)
    assert not mismatched, (
        f"{case.name}: {', '.join(mismatched)} differ from the goldens; "
        "run REFRESH_GOLDEN=1 pytest tests/unit/golden and review the diff"
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_deterministic(case: GoldenCase) -> None:
    assert _generate(case).to_dict() == _generate(case).to_dict()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_warm_cache_equals_cold(case: GoldenCase) -> None:
    """Emissary's compile_with_cachecheck: a second generation from the same push (served
    from the cache, each hit rebuilt and compared) equals the first."""
    _, push = push_from_paths(case.inputs)
    cache_for(push).assert_unchanged = True
    proxy = proxy_for(push, case.proxy, case.proxy_type)
    cold = generate_proxy_config(push, proxy).to_dict()
    assert generate_proxy_config(push, proxy).to_dict() == cold
    assert cache_for(push).hits > 0


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_consistent(case: GoldenCase) -> None:
    """go-control-plane's Consistent(): names unique, every reference resolves."""
    config = _generate(case)
    listener_names = [listener.name for listener in config.listeners]
    assert len(listener_names) == len(set(listener_names)), "duplicate listener names"
    addresses = [
        (lst.address.socket_address.address, lst.address.socket_address.port_value)
        for lst in config.listeners
    ]
    assert len(addresses) == len(set(addresses)), "two listeners on one address"
    route_names = {r.name for r in config.routes}
    assert rds_names(config.listeners) <= route_names, "LDS refers to a missing route config"
    cluster_names = [c.name for c in config.clusters]
    assert len(cluster_names) == len(set(cluster_names)), "duplicate cluster names"
    eds = {
        c.eds_cluster_config.service_name
        for c in config.clusters
        if c.HasField("eds_cluster_config")
    }
    assert eds == {e.cluster_name for e in config.endpoints}, "EDS cluster without assignment"


def test_no_stale_golden_files() -> None:
    expected = {f"{short}.yaml" for short in [*SECTIONS, *OPTIONAL_SECTIONS]}
    expected |= {"proxy.yaml", "config.yaml"}
    for folder in CASES_DIR.iterdir():
        assert folder.is_dir(), f"stray file {folder}"
        extra = {p.name for p in folder.iterdir()} - expected
        assert not extra, f"{folder.name}: files that are not part of a case: {sorted(extra)}"
