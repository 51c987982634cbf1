"""AgentOptions: identity, labels from flags and downward-API files, addresses."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from meshpilot.agent.options import (
    AgentOptions,
    InterceptionMode,
    detect_node_ip,
    discovery_endpoint,
    parse_label_args,
    read_labels_file,
)
from meshpilot.errors import MeshpilotError
from meshpilot.model.proxy import ProxyType


def sidecar(**kw: object) -> AgentOptions:
    return AgentOptions(
        proxy_type=ProxyType.SIDECAR, pod_name="reviews-v2-7d8b9f-x1y2z", namespace="shop", **kw
    )  # type: ignore[arg-type]


def test_node_id_and_service_cluster() -> None:
    options = sidecar(ip_addresses=("10.0.0.7",), labels={"app": "reviews"})
    assert options.node_id == "sidecar~10.0.0.7~reviews-v2-7d8b9f-x1y2z.shop~shop.svc.cluster.local"
    assert options.service_cluster == "reviews.shop"


def test_service_cluster_without_app_label_uses_the_workload() -> None:
    options = sidecar(labels={"pod-template-hash": "7d8b9f"})
    assert options.workload == "reviews-v2"
    assert options.service_cluster == "reviews-v2.shop"
    assert sidecar(workload_name="reviews").service_cluster == "reviews.shop"


def test_capture_only_for_sidecars_not_none() -> None:
    assert sidecar().captures
    assert not sidecar(interception_mode=InterceptionMode.NONE).captures
    router = AgentOptions(proxy_type=ProxyType.ROUTER, pod_name="gw", namespace="istio-system")
    assert not router.captures


def test_router_rejects_interception_mode() -> None:
    with pytest.raises(MeshpilotError, match="sidecars only"):
        AgentOptions(
            proxy_type=ProxyType.ROUTER,
            pod_name="gw",
            namespace="istio-system",
            interception_mode=InterceptionMode.NONE,
        )


@pytest.mark.parametrize("address", ["istiod", "istiod:", ":15010", "host:99999", "h:p"])
def test_bad_discovery_address(address: str) -> None:
    with pytest.raises(MeshpilotError, match="discovery address"):
        sidecar(discovery_address=address)


def test_discovery_endpoint_forms() -> None:
    assert discovery_endpoint("istiod.istio-system.svc:15012") == ("istiod.istio-system.svc", 15012)
    assert discovery_endpoint("[::1]:15010") == ("::1", 15010)


def test_bad_ip_is_rejected() -> None:
    with pytest.raises(MeshpilotError, match="invalid IP"):
        sidecar(ip_addresses=("10.0.0",))


def test_label_args() -> None:
    assert parse_label_args(["app=ratings", "version = v1", "empty="]) == {
        "app": "ratings",
        "version": "v1",
        "empty": "",
    }
    with pytest.raises(MeshpilotError, match="key=value"):
        parse_label_args(["novalue"])


def test_downward_api_labels_file(tmp_path: Path) -> None:
    path = tmp_path / "labels"
    path.write_text(
        'app="ratings"\nversion="v1"\n\nsecurity.istio.io/tlsMode="istio"\nplain=yes\n'
        'quoted="a \\"b\\""\n'
    )
    assert read_labels_file(path) == {
        "app": "ratings",
        "version": "v1",
        "security.istio.io/tlsMode": "istio",
        "plain": "yes",
        "quoted": 'a "b"',
    }


def test_labels_file_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "labels"
    path.write_text('app="ratings"\nbroken\n')
    with pytest.raises(MeshpilotError, match=r"labels:2"):
        read_labels_file(path)
    with pytest.raises(MeshpilotError, match="cannot read"):
        read_labels_file(tmp_path / "missing")


def test_detect_node_ip_is_ipv4() -> None:
    ip = ipaddress.ip_address(detect_node_ip())
    assert ip.version == 4


def test_unix_socket_discovery_address() -> None:
    assert sidecar(discovery_address="unix:///run/xds.sock").discovery_uds == "/run/xds.sock"
    assert sidecar(discovery_address="unix:/run/xds.sock").discovery_uds == "/run/xds.sock"
    assert sidecar(discovery_address="127.0.0.1:15010").discovery_uds is None
    with pytest.raises(MeshpilotError, match="needs a path"):
        sidecar(discovery_address="unix:")


def test_several_discovery_addresses_are_replicas() -> None:
    options = sidecar(discovery_address="10.0.0.5:15012, 10.0.0.6:15012")
    assert options.discovery_addresses == ("10.0.0.5:15012", "10.0.0.6:15012")
    assert options.discovery_host_port == ("10.0.0.5", 15012)
    assert options.secure_xds


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("10.0.0.5:15012,", "an empty entry"),
        ("10.0.0.5:15012,unix:/run/xds.sock", "a unix: socket cannot be listed"),
        ("10.0.0.5:15012,10.0.0.6", "'10.0.0.6': expected host:port"),
    ],
)
def test_bad_replica_lists_name_the_problem(address: str, why: str) -> None:
    with pytest.raises(MeshpilotError, match=why):
        sidecar(discovery_address=address)
