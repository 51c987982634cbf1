"""`proxy-config endpoints`: health from Envoy's /clusters, or what the control plane
declares in EDS; istioctl's filters."""

from __future__ import annotations

import pytest

from meshpilot.proxyinfo import EndpointFilter, ProxyData, endpoint_table, select_endpoints
from meshpilot.proxyinfo.endpoints import COLUMNS, EDS_COLUMNS, endpoint_rows
from tests.unit.proxyinfo.dumps import INGRESS, admin_data, control_plane_dump

REVIEWS = "outbound|9080||reviews.default.svc.cluster.local"


def test_admin_rows_carry_envoys_health_and_outlier_state() -> None:
    table = endpoint_table(admin_data(), EndpointFilter())
    assert table.columns == COLUMNS
    assert list(table.rows) == [
        ("10.10.0.11:9080", "HEALTHY", "OK", "outbound|9080||details.default.svc.cluster.local"),
        ("10.10.0.12:9080", "UNHEALTHY", "OK", REVIEWS),
        ("10.10.0.13:9080", "HEALTHY", "OK", REVIEWS),
        ("10.10.0.14:9080", "HEALTHY", "FAILED", REVIEWS),
        ("unix://./etc/istio/proxy/XDS", "HEALTHY", "OK", "xds-grpc"),
    ]


@pytest.mark.parametrize(
    ("where", "endpoints"),
    [
        (EndpointFilter(status="unhealthy"), ["10.10.0.12:9080"]),
        (
            EndpointFilter(cluster=REVIEWS.upper()),
            ["10.10.0.12:9080", "10.10.0.13:9080", "10.10.0.14:9080"],
        ),
        (EndpointFilter(address="10.10.0.11", port=9080), ["10.10.0.11:9080"]),
        (EndpointFilter(port=1), []),
    ],
)
def test_filters(where: EndpointFilter, endpoints: list[str]) -> None:
    assert [r.endpoint for r in endpoint_rows(admin_data(), where)] == endpoints


def test_raw_output_is_the_cluster_statuses_with_a_match() -> None:
    raw = select_endpoints(admin_data(), EndpointFilter(status="UNHEALTHY"))
    assert [c["name"] for c in raw] == [REVIEWS]
    assert len(select_endpoints(admin_data(), EndpointFilter())) == 3  # BlackHoleCluster has none


def test_control_plane_rows_come_from_eds_with_their_locality() -> None:
    data = ProxyData("Source: control plane (test)", control_plane_dump(INGRESS))
    where = EndpointFilter(cluster="outbound|9080|v2|reviews.default.svc.cluster.local")
    assert endpoint_table(data, where).columns == EDS_COLUMNS
    assert [r.cells() for r in endpoint_rows(data, where)] == [
        ("10.10.0.13:9080", "HEALTHY", "region-a/zone-2", where.cluster)
    ]
    raw = select_endpoints(data, EndpointFilter(address="10.10.0.13"))
    assert {c["cluster_name"] for c in raw} == {
        "outbound|9080|v2|reviews.default.svc.cluster.local",
        "outbound|9080||reviews.default.svc.cluster.local",
    }
