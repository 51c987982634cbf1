"""`proxy-config clusters`: istioctl's columns, sorting, static clusters and filters."""

from __future__ import annotations

import pytest

from meshpilot.proxyinfo import ClusterFilter, cluster_table, select_clusters
from meshpilot.proxyinfo.clusters import COLUMNS, ClusterName
from tests.unit.proxyinfo.dumps import INGRESS, SIDECAR, control_plane_dump, envoy_dump

REVIEWS = "reviews.default.svc.cluster.local"


def _rows(where: ClusterFilter, case: str = SIDECAR) -> list[tuple[str, ...]]:
    table = cluster_table(envoy_dump(case), where)
    assert table.columns == COLUMNS
    return list(table.rows)


def test_summary_lists_istio_and_static_clusters_sorted_like_istioctl() -> None:
    rows = _rows(ClusterFilter())
    assert rows[0] == ("", "9080", "-", "inbound", "ORIGINAL_DST", "")  # inbound|9080||
    assert ("BlackHoleCluster", "-", "-", "-", "STATIC", "") in rows
    assert ("xds-grpc", "-", "-", "-", "STATIC", "") in rows
    assert ("sds-grpc", "-", "-", "-", "STATIC", "") in rows
    reviews = [r for r in rows if r[0] == REVIEWS]
    assert [r[2] for r in reviews] == ["-", "v1", "v2", "v3"]  # by host, then subset
    assert reviews[1] == (REVIEWS, "9080", "v1", "outbound", "EDS", "reviews.default")
    hosts = [r[0] for r in rows]
    assert hosts == sorted(hosts)


def test_destination_rule_column_names_the_rule_that_shaped_the_cluster() -> None:
    rows = {(r[0], r[1], r[2]): r for r in _rows(ClusterFilter())}
    assert rows[("httpbin.example.com", "443", "-")][4:] == (
        "STRICT_DNS",
        "originate-tls-for-httpbin.default",
    )
    assert rows[("details.default.svc.cluster.local", "9080", "-")][5] == ""


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (ClusterFilter(fqdn=REVIEWS), 4),
        (ClusterFilter(fqdn=REVIEWS, subset="v2"), 1),
        (ClusterFilter(port=27017), 1),
        (ClusterFilter(direction="inbound"), 1),
        (ClusterFilter(fqdn="istio-egressgateway", port=443, subset="httpbin"), 1),
        (ClusterFilter(fqdn="nowhere"), 0),
    ],
)
def test_filters_are_substrings_of_the_cluster_name(where: ClusterFilter, expected: int) -> None:
    assert len(_rows(where)) == expected
    assert len(select_clusters(envoy_dump(SIDECAR), where)) == expected


def test_port_filter_needs_the_whole_port_between_bars() -> None:
    names = [c["name"] for c in select_clusters(envoy_dump(SIDECAR), ClusterFilter(port=80))]
    assert names and all("|80|" in n for n in names)


def test_control_plane_dump_has_no_static_clusters() -> None:
    rows = cluster_table(control_plane_dump(INGRESS), ClusterFilter()).rows
    assert not {"xds-grpc", "sds-grpc", "agent"} & {r[0] for r in rows}
    assert (
        "reviews.default.svc.cluster.local",
        "9080",
        "v3",
        "outbound",
        "EDS",
        "reviews.default",
    ) in rows


def test_cluster_names_are_taken_apart_as_istio_does() -> None:
    assert ClusterName.parse("outbound|9080|v1|reviews") == ClusterName(
        "outbound", 9080, "v1", "reviews", istio=True
    )
    assert ClusterName.parse("inbound|8080||") == ClusterName("inbound", 8080, "", "", istio=True)
    assert ClusterName.parse("PassthroughCluster").istio is False
    assert ClusterName.parse("outbound_.9080_.v1_.reviews").istio is False  # SNI form


def test_missing_type_is_static_as_in_proto() -> None:
    dump = envoy_dump(SIDECAR)
    for cluster in dump.clusters():
        cluster.pop("type", None)
    assert {r[4] for r in cluster_table(dump, ClusterFilter()).rows} == {"STATIC"}
