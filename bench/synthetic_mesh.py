"""The fixed synthetic mesh of benchmark B1 (and later B3/B4), built as YAML text.

1000 Services with 2 ports each (http 8080, grpc 9090) in 10 namespaces, 3000 pods (3 per
service: v1, v1, v2), 1000 VirtualServices (header match to v2, then an 80/20 split),
500 DestinationRules with 2 subsets and a traffic policy.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MeshShape", "synthetic_mesh_yaml"]


@dataclass(frozen=True)
class MeshShape:
    services: int = 1000
    namespaces: int = 10
    pods_per_service: int = 3
    virtual_services: int = 1000
    destination_rules: int = 500


def _service(i: int, ns: str) -> str:
    return f"""\
apiVersion: v1
kind: Service
metadata: {{name: svc-{i}, namespace: {ns}}}
spec:
  clusterIP: 10.{100 + i // 250}.{i % 250}.1
  selector: {{app: svc-{i}}}
  ports:
  - {{name: http, port: 8080, targetPort: 8080}}
  - {{name: grpc-api, port: 9090, targetPort: 9090}}
"""


def _pod(i: int, j: int, ns: str) -> str:
    version = "v2" if j == 2 else "v1"
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: svc-{i}-{version}-5f6d7c8b9-p{j:04d}
  namespace: {ns}
  labels: {{app: svc-{i}, version: {version}, pod-template-hash: 5f6d7c8b9,
           security.istio.io/tlsMode: istio, topology.kubernetes.io/region: r1,
           topology.kubernetes.io/zone: z{j}}}
spec: {{serviceAccountName: svc-{i}}}
status: {{podIP: 10.{200 + i // 250}.{i % 250}.{j + 1}}}
"""


def _virtual_service(i: int, ns: str, with_subsets: bool) -> str:
    v2 = "subset: v2" if with_subsets else ""
    v1 = "subset: v1" if with_subsets else ""
    return f"""\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: svc-{i}, namespace: {ns}}}
spec:
  hosts: [svc-{i}]
  http:
  - match:
    - headers: {{x-canary: {{exact: "yes"}}}}
    route:
    - destination: {{host: svc-{i}, port: {{number: 8080}}, {v2}}}
  - route:
    - destination: {{host: svc-{i}, port: {{number: 8080}}, {v1}}}
      weight: 80
    - destination: {{host: svc-{i}, port: {{number: 8080}}, {v2}}}
      weight: 20
    retries: {{attempts: 3, perTryTimeout: 2s}}
    timeout: 10s
"""


def _destination_rule(i: int, ns: str) -> str:
    return f"""\
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: svc-{i}, namespace: {ns}}}
spec:
  host: svc-{i}
  trafficPolicy:
    loadBalancer: {{simple: ROUND_ROBIN}}
    connectionPool: {{http: {{http1MaxPendingRequests: 100}}}}
    outlierDetection: {{consecutive5xxErrors: 5, interval: 10s, baseEjectionTime: 30s}}
  subsets:
  - {{name: v1, labels: {{version: v1}}}}
  - {{name: v2, labels: {{version: v2}}}}
"""


def synthetic_mesh_yaml(shape: MeshShape = MeshShape()) -> str:
    docs = []
    for i in range(shape.services):
        ns = f"ns-{i % shape.namespaces}"
        docs.append(_service(i, ns))
        docs.extend(_pod(i, j, ns) for j in range(shape.pods_per_service))
        if i < shape.destination_rules:
            docs.append(_destination_rule(i, ns))
        if i < shape.virtual_services:
            docs.append(_virtual_service(i, ns, with_subsets=i < shape.destination_rules))
    return "---\n".join(docs)
