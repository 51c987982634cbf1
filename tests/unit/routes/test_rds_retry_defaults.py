"""Retry fields beyond attempts/retryOn, and the mesh's defaultHttpRetryPolicy."""

from __future__ import annotations

from tests.unit.routes.rds_helpers import SERVICES, pod, push_of, route_config, vhost

MESH_DEFAULT = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    defaultHttpRetryPolicy: {attempts: 5, retryOn: "gateway-error", perTryTimeout: 1s}
"""

VS = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - match: [{uri: {prefix: /sticky}}]
    route: [{destination: {host: reviews}}]
    retries: {attempts: 2, retryIgnorePreviousHosts: false, backoff: 250ms}
  - route: [{destination: {host: reviews}}]
"""


def test_ignore_previous_hosts_and_backoff() -> None:
    push = push_of(SERVICES, pod("client"), VS)
    sticky, _ = vhost(route_config(push, 9080), "reviews.default.svc.cluster.local:9080")["routes"]
    policy = sticky["route"]["retry_policy"]
    assert "retry_host_predicate" not in policy
    assert policy["retry_back_off"] == {"base_interval": "0.250s"}
    assert policy["num_retries"] == 2


def test_mesh_default_retry_policy_replaces_istios_default() -> None:
    push = push_of(SERVICES, pod("client"), VS, MESH_DEFAULT)
    config = route_config(push, 9080)
    _, plain = vhost(config, "reviews.default.svc.cluster.local:9080")["routes"]
    assert plain["route"]["retry_policy"]["num_retries"] == 5
    assert plain["route"]["retry_policy"]["retry_on"] == "gateway-error"
    assert plain["route"]["retry_policy"]["per_try_timeout"] == "1s"
    [default] = vhost(config, "ratings.default.svc.cluster.local:9080")["routes"]
    assert default["name"] == "default"
    assert default["route"]["retry_policy"]["num_retries"] == 5
