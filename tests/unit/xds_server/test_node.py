"""Proxy identity from the node istio-proxy sends, and from the Pod when the config has it."""

from __future__ import annotations

import pytest
from envoy.config.core.v3 import base_pb2

from meshpilot.model.proxy import ProxyType
from meshpilot.xds.node import parse_node, proxy_for
from tests.conftest import push_from_text

POD = """
apiVersion: v1
kind: Pod
metadata: {name: reviews-v1, namespace: default, labels: {app: reviews, version: v1}}
spec: {serviceAccountName: bookinfo-reviews}
status: {podIP: 10.244.1.7}
"""


def node(node_id: str, **metadata: object) -> base_pb2.Node:
    out = base_pb2.Node(id=node_id)
    out.metadata.update(metadata)
    out.locality.region, out.locality.zone = "eu", "eu-1"
    return out


def test_metadata_describes_a_proxy_without_a_pod() -> None:
    info = parse_node(
        node(
            "sidecar~10.1.2.3~vm-1.legacy~legacy.svc.cluster.local",
            NAMESPACE="legacy",
            LABELS={"app": "billing"},
            SERVICE_ACCOUNT="billing",
            INTERCEPTION_MODE="NONE",
            ISTIO_VERSION="1.27.2",
            INSTANCE_IPS="10.1.2.3,fd00::3",
        )
    )
    proxy = proxy_for(push_from_text(POD)[1], info)
    assert (proxy.type, proxy.id, proxy.namespace) == (ProxyType.SIDECAR, "vm-1.legacy", "legacy")
    assert proxy.labels == {"app": "billing"} and proxy.service_account == "billing"
    assert proxy.ip_addresses == ("10.1.2.3", "fd00::3")
    assert not proxy.intercept and proxy.istio_version == "1.27.2"
    assert str(proxy.locality) == "eu/eu-1"
    assert proxy.dns_domain == "legacy.svc.cluster.local"


def test_the_pod_in_the_config_wins_for_labels_ip_and_account() -> None:
    info = parse_node(
        node("sidecar~10.9.9.9~reviews-v1.default~default.svc.cluster.local", LABELS={"x": "y"})
    )
    proxy = proxy_for(push_from_text(POD)[1], info)
    assert proxy.labels == {"app": "reviews", "version": "v1"}
    assert proxy.ip_addresses == ("10.244.1.7",)
    assert proxy.service_account == "bookinfo-reviews"
    assert proxy.intercept, "REDIRECT unless the agent says otherwise"


def test_router_nodes() -> None:
    info = parse_node(node("router~10.0.0.5~gw-1.istio-system~istio-system.svc.cluster.local"))
    assert info.type is ProxyType.ROUTER and info.id == "gw-1.istio-system"


@pytest.mark.parametrize(
    ("node_id", "message"),
    [
        ("", "4 parts"),
        ("sidecar~1.2.3.4~pod", "4 parts"),
        ("waypoint~1.2.3.4~p.ns~ns.svc.cluster.local", "unknown proxy type"),
        ("sidecar~1.2.3.4~pod~ns.svc.cluster.local", "<pod>.<namespace>"),
    ],
)
def test_bad_node_ids_are_refused_with_the_reason(node_id: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_node(node(node_id))
