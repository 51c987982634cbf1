"""YAML for the mTLS tests: a server workload with a Service, a client, and policies."""

from __future__ import annotations

SERVER = "api-7d9f8c6b5-aaaaa.shop"
CLIENT = "web-5b6c7d8e9-bbbbb.shop"

BASE = """\
apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop}
spec:
  clusterIP: 10.96.7.1
  selector: {app: api}
  ports:
  - {name: http, port: 80, targetPort: 8080}
  - {name: tcp-admin, port: 9000}
  - {name: misc, port: 7000}
---
apiVersion: v1
kind: Pod
metadata:
  name: api-7d9f8c6b5-aaaaa
  namespace: shop
  labels: {app: api, version: v1, security.istio.io/tlsMode: istio}
spec: {serviceAccountName: api}
status: {podIP: 10.30.0.1}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-5b6c7d8e9-bbbbb
  namespace: shop
  labels: {app: web, security.istio.io/tlsMode: istio}
spec: {serviceAccountName: web}
status: {podIP: 10.30.0.2}
"""


def peer_authn(
    name: str,
    namespace: str,
    mode: str | None,
    selector: str | None = None,
    ports: str | None = None,
    created: str | None = None,
) -> str:
    """A PeerAuthentication document; `selector` and `ports` are YAML flow maps."""
    lines = [
        "---",
        "apiVersion: security.istio.io/v1",
        "kind: PeerAuthentication",
        "metadata:",
        f"  name: {name}",
        f"  namespace: {namespace}",
    ]
    if created:
        lines.append(f'  creationTimestamp: "{created}"')
    lines.append("spec:" if (mode or selector or ports) else "spec: {}")
    if selector:
        lines.append(f"  selector: {{matchLabels: {selector}}}")
    if mode:
        lines.append(f"  mtls: {{mode: {mode}}}")
    if ports:
        lines.append(f"  portLevelMtls: {ports}")
    return "\n".join(lines) + "\n"
