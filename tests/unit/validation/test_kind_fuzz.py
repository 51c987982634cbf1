"""Fuzz over objects of every Istio kind: a valid object of each kind loads clean; the same
object with generated damage (wrong types, odd values, unknown or missing fields) never
raises and every error it gets names the field at fault."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshpilot.config.diagnostics import Severity
from meshpilot.config.loader import load_text
from meshpilot.config.yaml_load import load_yaml_all

VALID = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: vs, namespace: shop}
spec:
  hosts: [cart]
  http:
  - match: [{uri: {prefix: /api}, headers: {x-v: {exact: "2"}}}]
    route: [{destination: {host: cart, subset: v2, port: {number: 80}}, weight: 100}]
    retries: {attempts: 3, perTryTimeout: 2s, retryOn: 5xx}
    timeout: 5s
  tcp: [{route: [{destination: {host: cart, port: {number: 9000}}}]}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr, namespace: shop}
spec:
  host: cart
  trafficPolicy:
    loadBalancer:
      simple: LEAST_REQUEST
      warmup: {duration: 30s, minimumPercent: 10, aggression: 2}
    connectionPool:
      tcp: {maxConnections: 10, connectTimeout: 1s, tcpKeepalive: {time: 60s, interval: 10s}}
      http: {h2UpgradePolicy: UPGRADE, idleTimeout: 30s, maxConcurrentStreams: 100}
    outlierDetection: {consecutive5xxErrors: 5, interval: 10s, baseEjectionTime: 30s}
    tls: {mode: ISTIO_MUTUAL}
  subsets: [{name: v2, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: shop}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: [shop/cart.example.com]
    tls: {mode: SIMPLE, credentialName: cart-cert}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: se, namespace: shop}
spec:
  hosts: [db.example.com]
  addresses: [2001:db8::10, 1:2:3:4:5:6:7:8]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.9}, {address: 2001:0:0:0:0:0:0:5}]
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: we, namespace: shop}
spec: {address: 10.1.0.7, labels: {app: vm}, ports: {http: 8080}, serviceAccount: vm}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: sc, namespace: shop}
spec:
  workloadSelector: {labels: {app: cart}}
  egress: [{hosts: [./*, istio-system/*]}]
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: pa, namespace: shop}
spec:
  selector: {matchLabels: {app: cart}}
  mtls: {mode: STRICT}
  portLevelMtls: {8080: {mode: PERMISSIVE}}
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: ra, namespace: shop}
spec:
  targetRefs: [{group: "", kind: Service, name: cart}]
  jwtRules:
  - issuer: https://idp.example
    jwksUri: https://idp.example/keys
    outputClaimToHeaders: [{header: x-sub, claim: sub}]
    spaceDelimitedClaims: [scope]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ap, namespace: shop}
spec:
  selector: {matchLabels: {app: cart}}
  action: ALLOW
  rules:
  - from: [{source: {principals: [cluster.local/ns/shop/sa/web], ipBlocks: [10.0.0.0/8]}}]
    to: [{operation: {methods: [GET], paths: [/api/*], ports: ["8080"]}}]
    when: [{key: "request.headers[x-tenant]", values: [a]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ap-custom, namespace: shop}
spec:
  action: CUSTOM
  provider: {name: opa}
  rules: [{to: [{operation: {paths: [/admin]}}]}]
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: ef, namespace: shop}
spec:
  workloadSelector: {labels: {app: cart}}
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_INBOUND
      listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}
    patch: {operation: INSERT_BEFORE, value: {name: envoy.filters.http.buffer}}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: tm, namespace: shop}
spec:
  selector: {matchLabels: {app: cart}}
  accessLogging: [{providers: [{name: envoy}]}]
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: wp, namespace: shop}
spec:
  selector: {matchLabels: {app: cart}}
  url: oci://registry.example/filter:1
  phase: AUTHN
---
apiVersion: networking.istio.io/v1beta1
kind: ProxyConfig
metadata: {name: pc, namespace: shop}
spec: {concurrency: 2, environmentVariables: {A: b}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: wg, namespace: shop}
spec:
  metadata: {labels: {app: vm}}
  template: {serviceAccount: vm, ports: {http: 8080}}
"""
SEEDS: list[dict[str, Any]] = load_yaml_all(VALID, "seeds.yaml")
ODD_VALUES = [
    None, True, 0, -1, 2**31, 2**64, 1.5, float("nan"), "", "*", "-", "a b", ":authority",
    "0s", "99999999999s", "10.0.0.0/99", "::", "x" * 300, "é\u202e", [], [None], [{}], {},
    {"": ""}, {"unknownField": 1},
]  # fmt: skip


def _paths(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place inside the object's spec (the spec itself included)."""
    out = [path]
    if isinstance(data, dict):
        for key, value in data.items():
            out += _paths(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            out += _paths(value, (*path, index))
    return out


def _mutate(obj: dict[str, Any], path: tuple[Any, ...], how: str, value: Any) -> None:
    parent: Any = obj
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    here = parent.get(last) if isinstance(parent, dict) else parent[last]
    if how == "set":
        parent[last] = value
    elif how == "drop" and isinstance(parent, dict):
        parent.pop(last, None)
    elif how == "add" and isinstance(here, dict):
        here["fuzzField"] = value
    elif how == "add" and isinstance(here, list):
        here.append(value)


@st.composite
def damaged(draw: st.DrawFn) -> dict[str, Any]:
    obj = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        paths = [("spec", *p) for p in _paths(obj.get("spec"))]
        path = draw(st.sampled_from(paths))
        how = draw(st.sampled_from(["set", "set", "drop", "add"]))
        _mutate(obj, path, how, copy.deepcopy(draw(st.sampled_from(ODD_VALUES))))
    return obj


@pytest.mark.parametrize("seed", SEEDS, ids=[f"{s['kind']}-{s['metadata']['name']}" for s in SEEDS])
def test_valid_object_of_each_kind_loads_clean(seed: dict[str, Any]) -> None:
    loaded = load_text(yaml.safe_dump(seed), "valid.yaml")
    assert [str(d) for d in loaded.diagnostics if d.severity is Severity.ERROR] == []
    assert len(loaded.objects) == 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_damaged_objects_never_raise_and_errors_name_a_field(obj: dict[str, Any]) -> None:
    loaded = load_text(yaml.safe_dump(obj, allow_unicode=True), "fuzz.yaml")
    for diag in loaded.diagnostics:
        assert "internal error" not in diag.message, str(diag)
        if diag.severity is Severity.ERROR:
            assert diag.field, f"an error without a field: {diag}"
            assert diag.kind == obj["kind"], str(diag)
