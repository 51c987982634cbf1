"""Outbound clusters work out per service what used to be asked per cluster.

clusters/outbound.py decides automatic mTLS from the service's mode looked up once
(`service_mtls_mode` without a policy) plus the cluster's load balancer; this pins that
shortcut to `uses_auto_mtls`, the per-cluster rule it replaces, over the cases of its table.
"""

from __future__ import annotations

import pytest

from meshpilot.xds.generate.clusters.mtls import service_mtls_mode, uses_auto_mtls
from meshpilot.xds.generate.clusters.outbound import _auto_mtls
from meshpilot.xds.generate.traffic_policies import push_traffic_policy
from tests.conftest import proxy_for, push_from_text


def _mesh(mode: str, simple: str) -> str:
    return f"""\
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: prod}}
spec:
  clusterIP: 10.96.0.2
  selector: {{app: web}}
  ports: [{{name: http, port: 80}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: web-7d9f8c6b5-aaaaa, namespace: prod, labels: {{app: web}}}}
status: {{podIP: 10.0.0.1}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: ext, namespace: prod}}
spec:
  hosts: [api.example.com]
  ports: [{{number: 443, name: tls, protocol: TLS}}]
  resolution: DNS
  location: MESH_EXTERNAL
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {{name: default, namespace: prod}}
spec: {{mtls: {{mode: {mode}}}}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: web, namespace: prod}}
spec:
  host: web
  trafficPolicy: {{loadBalancer: {{simple: {simple}}}}}
"""


@pytest.mark.parametrize("mode", ["STRICT", "PERMISSIVE", "DISABLE"])
@pytest.mark.parametrize("simple", ["ROUND_ROBIN", "PASSTHROUGH"])
def test_auto_mtls_from_the_service_mode_equals_the_per_cluster_rule(
    mode: str, simple: str
) -> None:
    _, push = push_from_text(_mesh(mode, simple))
    proxy = proxy_for(push, "web-7d9f8c6b5-aaaaa.prod")
    for svc in push.registry.services:
        rule = push.destination_rule(proxy, svc)
        for policy in (None, push_traffic_policy(push, rule, svc.ports[0].port) if rule else None):
            expected = uses_auto_mtls(push, svc, policy, None)
            assert _auto_mtls(push, service_mtls_mode(push, svc, None), policy) is expected
    web = next(s for s in push.registry.services if s.hostname.startswith("web."))
    policy = push_traffic_policy(push, push.destination_rule(proxy, web), 80)
    assert uses_auto_mtls(push, web, policy, None) is (
        mode != "DISABLE" and simple != "PASSTHROUGH"
    )
