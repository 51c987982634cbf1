"""The analyzers' host lookups (by index, not a scan of every service per question) give
exactly what comparing every service's hostname gives."""

from __future__ import annotations

import pytest

from meshpilot.analysis.lookup import services_intersecting
from meshpilot.config.hosts import hosts_intersect
from meshpilot.config.loader import load_documents
from meshpilot.config.yaml_source import read_text
from meshpilot.model.push_context import PushContext, build_push_context

MESH = """\
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec: {ports: [{port: 9080, name: http}]}
---
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: other}
spec: {ports: [{port: 9080, name: http}]}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: wide, namespace: shop}
spec:
  hosts: ["*.example.com", "api.example.com"]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: narrow, namespace: other}
spec:
  hosts: ["*.eu.example.com"]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: NONE
"""

HOSTS = [
    "reviews.shop.svc.cluster.local",
    "ratings.shop.svc.cluster.local",
    "api.example.com",
    "db.eu.example.com",
    "example.com",
    "*.example.com",
    "*.eu.example.com",
    "*.svc.cluster.local",
    "*",
]


@pytest.fixture(scope="module")
def push() -> PushContext:
    loaded = load_documents(read_text(MESH, "mesh.yaml").documents)
    assert not loaded.diagnostics
    return build_push_context(loaded.objects, loaded.mesh)


@pytest.mark.parametrize("host", HOSTS)
def test_services_intersecting_equals_a_scan_of_every_service(push: PushContext, host: str) -> None:
    scan = [s for s in push.registry.services if hosts_intersect(s.hostname, host)]
    assert services_intersecting(push, host) == scan


def test_the_lookup_finds_wildcard_and_exact_services(push: PushContext) -> None:
    found = {(s.hostname, s.namespace) for s in services_intersecting(push, "db.eu.example.com")}
    assert found == {("*.example.com", "shop"), ("*.eu.example.com", "other")}
    found = {(s.hostname, s.namespace) for s in services_intersecting(push, "api.example.com")}
    assert found == {("*.example.com", "shop"), ("api.example.com", "shop")}
