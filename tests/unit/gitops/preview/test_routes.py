"""Human lines for changed route configurations and endpoints: a table of cases."""

from __future__ import annotations

from typing import Any

import pytest

from meshpilot.gitops.preview.model import Change, XdsChange
from meshpilot.gitops.preview.routes import describe_route_config
from meshpilot.gitops.preview.xds_diff import diff_translations

C = "outbound|9080|{}|reviews.default.svc.cluster.local"
VH = "reviews.default.svc.cluster.local:9080"


def _weighted(*pairs: tuple[str, int], name: str = "split", **extra: Any) -> dict[str, Any]:
    clusters = [{"name": C.format(s), "weight": w} for s, w in pairs]
    action = {"weighted_clusters": {"clusters": clusters}, **extra}
    return {"name": name, "match": {"prefix": "/"}, "route": action}


def _config(*routes: dict[str, Any], vhost: str = VH) -> dict[str, Any]:
    return {"name": "9080", "virtual_hosts": [{"name": vhost, "routes": list(routes)}]}


CASES = [
    pytest.param(
        _config(_weighted(("v1", 80), ("v2", 20))),
        _config(_weighted(("v1", 50), ("v2", 50))),
        [f"{VH} weights v1 80→50, v2 20→50 (route split)"],
        id="weight-shift",
    ),
    pytest.param(
        _config({"name": "all", "route": {"cluster": C.format("v1")}}),
        _config({"name": "all", "route": {"cluster": C.format("v2")}}),
        [f"{VH} weights v1 100→0, v2 0→100 (route all)"],
        id="new-destination",
    ),
    pytest.param(
        _config(_weighted(("v1", 100), timeout="10s")),
        _config(_weighted(("v1", 100), timeout="5s")),
        [f"{VH} route split: timeout 10s→5s"],
        id="timeout",
    ),
    pytest.param(
        _config(_weighted(("v1", 100))),
        _config(_weighted(("v1", 100)), _weighted(("v2", 100), name="canary")),
        [f"{VH} route canary added → {C.format('v2')} 100"],
        id="route-added",
    ),
    pytest.param(
        _config(_weighted(("v1", 100))),
        {"name": "9080", "virtual_hosts": []},
        [f"virtual host {VH} removed"],
        id="vhost-removed",
    ),
]


@pytest.mark.parametrize(("old", "new", "lines"), CASES)
def test_route_config_lines(old: dict[str, Any], new: dict[str, Any], lines: list[str]) -> None:
    assert describe_route_config(old, new) == lines


def _assignment(*addresses: str) -> dict[str, Any]:
    eps = [
        {"endpoint": {"address": {"socket_address": {"address": a, "port_value": 9080}}}}
        for a in addresses
    ]
    return {"cluster_name": C.format(""), "endpoints": [{"lb_endpoints": eps}]}


def test_endpoints_and_secrets_details() -> None:
    name = C.format("")
    base = {
        "endpoints": {name: _assignment("10.0.0.1", "10.0.0.2")},
        "secrets": {"kubernetes://cert": {"name": "kubernetes://cert", "x": "old-secret"}},
    }
    head = {
        "endpoints": {name: _assignment("10.0.0.2", "10.0.0.3")},
        "secrets": {"kubernetes://cert": {"name": "kubernetes://cert", "x": "new-secret"}},
    }
    assert diff_translations(base, head) == (
        XdsChange("endpoints", name, Change.CHANGED, ("+ 10.0.0.3:9080", "- 10.0.0.1:9080")),
        XdsChange("secrets", "kubernetes://cert", Change.CHANGED, ()),  # named, never shown
    )
