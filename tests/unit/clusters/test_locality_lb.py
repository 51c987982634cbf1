"""Locality load balancing: priorities and weights relative to the proxy's locality, and
EDS copies keyed by it (two proxies in different zones see different priorities)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Locality
from meshpilot.xds.generate import generate_proxy_config
from tests.conftest import proxy_for, push_from_paths

INPUTS = Path(__file__).parents[1] / "golden" / "inputs"
REVIEWS = "outbound|9080||reviews.shop.svc.cluster.local"


def _priorities(push: PushContext, proxy: Proxy, cluster: str) -> dict[str, int]:
    config = generate_proxy_config(push, proxy)
    cla = next(e for e in config.endpoints if e.cluster_name == cluster)
    return {
        lb.endpoint.address.socket_address.address: group.priority
        for group in cla.endpoints
        for lb in group.lb_endpoints
    }


def test_failover_priorities_follow_the_proxy_locality() -> None:
    _, push = push_from_paths([INPUTS / "locality-lb.yaml"])
    east = proxy_for(push, "web-7c8d9e0f1-aaaaa.shop")
    assert _priorities(push, east, REVIEWS) == {
        "10.50.1.11": 0,  # same subzone
        "10.50.1.12": 1,  # same zone
        "10.50.1.13": 2,  # same region
        "10.50.1.15": 3,  # the failover region (us-east -> eu-west)
        "10.50.1.14": 4,  # any other region
    }
    # Same namespace and Sidecar (one proxy class), another locality: its own priorities.
    west = replace(east, locality=Locality("us-west", "us-west-1a"))
    assert _priorities(push, west, REVIEWS)["10.50.1.14"] == 0
    # ...and the first proxy's answer is unchanged (the memo is keyed by locality).
    assert _priorities(push, east, REVIEWS)["10.50.1.11"] == 0


def test_failover_needs_outlier_detection() -> None:
    _, push = push_from_paths([INPUTS / "locality-lb.yaml"])
    proxy = proxy_for(push, "web-7c8d9e0f1-aaaaa.shop")
    orders = "outbound|7070||orders.shop.svc.cluster.local"
    assert set(_priorities(push, proxy, orders).values()) == {0}


def test_distribute_weights_and_cluster_flag() -> None:
    _, push = push_from_paths([INPUTS / "locality-lb.yaml"])
    proxy = proxy_for(push, "web-7c8d9e0f1-aaaaa.shop")
    config = generate_proxy_config(push, proxy)
    ratings = "outbound|9080||ratings.shop.svc.cluster.local"
    cla = next(e for e in config.endpoints if e.cluster_name == ratings)
    weights = {
        g.locality.zone: g.load_balancing_weight.value for g in cla.endpoints if g.lb_endpoints
    }
    assert weights == {"us-east-1a": 80, "us-east-1b": 20}
    cluster = next(c for c in config.clusters if c.name == ratings)
    assert cluster.common_lb_config.HasField("locality_weighted_lb_config")
