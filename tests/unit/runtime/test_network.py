"""Pure parts of the pod runtime: subnet choice, IP allocation, names, owner liveness."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import pytest

from meshpilot.runtime.cluster import Cluster, ClusterConfig, ClusterError
from meshpilot.runtime.leftovers import Owner, cluster_of, live_clusters, owner_path
from meshpilot.runtime.network import DEFAULT_SUBNETS, IpPool, NetworkError, choose_subnet
from meshpilot.runtime.pod import PodError, PodSpec


def test_first_candidate_without_overlap_wins() -> None:
    taken = [IPv4Network("10.244.3.0/24"), IPv4Network("0.0.0.0/32"), IPv4Network("10.0.0.0/9")]
    assert choose_subnet(DEFAULT_SUBNETS, taken) == IPv4Network("10.245.0.0/16")
    assert choose_subnet(DEFAULT_SUBNETS, []) == IPv4Network("10.244.0.0/16")


def test_no_free_candidate_is_an_error() -> None:
    with pytest.raises(NetworkError, match="overlaps"):
        choose_subnet(["10.1.0.0/16"], [IPv4Network("10.0.0.0/8")])


def test_pool_gives_the_gateway_first_address_and_reuses_released_ones_last() -> None:
    pool = IpPool(IPv4Network("10.9.0.0/29"))
    assert pool.gateway == IPv4Address("10.9.0.1")
    first, second = pool.allocate(), pool.allocate()
    assert (first, second) == (IPv4Address("10.9.0.2"), IPv4Address("10.9.0.3"))
    pool.release(first)
    # not the address just released (callers may still have its old MAC cached)
    assert pool.allocate() == IPv4Address("10.9.0.4")
    assert pool.allocate(IPv4Address("10.9.0.6")) == IPv4Address("10.9.0.6")
    with pytest.raises(NetworkError, match="already taken"):
        pool.allocate(IPv4Address("10.9.0.6"))
    with pytest.raises(NetworkError, match="not a pod address"):
        pool.allocate(IPv4Address("10.9.0.1"))
    assert pool.allocate() == IPv4Address("10.9.0.5")
    assert pool.allocate() == first  # wrapped around
    with pytest.raises(NetworkError, match="no free address"):
        pool.allocate()


def test_names_carry_the_cluster_and_fit_interface_limits() -> None:
    cluster = Cluster(ClusterConfig(name="abcd1234"))
    spec = PodSpec(name="productpage-v1", namespace="bookinfo")
    assert cluster.netns_name(spec) == "mp-abcd1234-bookinfo-productpage-v1"
    assert cluster_of(cluster.netns_name(spec)) == "abcd1234"
    assert cluster_of(cluster.bridge_name) == "abcd1234"
    assert cluster_of("docker0") is None
    assert len(cluster.bridge_name) <= 15 and len(cluster.host_link_name(spec)) <= 15


@pytest.mark.parametrize("name", ["", "UPPER", "has-dash", "toolongname"])
def test_cluster_names_are_short_and_plain(name: str) -> None:
    with pytest.raises(ClusterError):
        ClusterConfig(name=name)


def test_pod_names_are_dns_labels() -> None:
    with pytest.raises(PodError, match="DNS label"):
        PodSpec(name="Bad_Name")


def test_owner_files_of_dead_processes_are_dropped(tmp_path: Path) -> None:
    Owner.current().write(owner_path(tmp_path, "live"))
    Owner(pid=2**22 + 1, start_time=1).write(owner_path(tmp_path, "dead"))
    owner_path(tmp_path, "junk").write_text("not json")
    assert live_clusters(tmp_path) == {"live"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live.owner"]
