"""A small mesh for preview tests: the live store holds workloads (services, pods, an
ingress gateway); a git repository holds the routing app (Gateway, VirtualService,
DestinationRule) as an Argo CD Application would sync it."""

from __future__ import annotations

from pathlib import Path

from meshpilot.config.yaml_source import read_text
from meshpilot.gitops.model import register_gitops_kinds
from meshpilot.store.directory import DirectoryStore
from tests.gitops_fixtures import GitRepo, make_repo

WORKLOADS = (
    """\
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: default}
spec:
  clusterIP: 10.96.0.12
  selector: {app: reviews}
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Service
metadata: {name: productpage, namespace: default}
spec:
  clusterIP: 10.96.0.13
  selector: {app: productpage}
  ports: [{name: http, port: 9080}]
"""
    + "".join(
        f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{app: {app}, version: {version}, security.istio.io/tlsMode: istio}}
spec: {{serviceAccountName: {app}}}
status: {{phase: Running, podIP: {ip}}}
"""
        for name, app, version, ip in [
            ("reviews-v1-a", "reviews", "v1", "10.10.0.11"),
            ("reviews-v2-a", "reviews", "v2", "10.10.0.12"),
            ("reviews-v2-b", "reviews", "v2", "10.10.0.13"),
            ("productpage-v1-a", "productpage", "v1", "10.10.0.21"),
        ]
    )
    + """---
apiVersion: v1
kind: Service
metadata: {name: istio-ingressgateway, namespace: istio-system}
spec:
  clusterIP: 10.96.1.10
  selector: {istio: ingressgateway}
  ports: [{name: http2, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata:
  name: istio-ingressgateway-a
  namespace: istio-system
  labels: {istio: ingressgateway}
spec: {serviceAccountName: istio-ingressgateway}
status: {phase: Running, podIP: 10.10.1.10}
"""
)

GATEWAY = """\
apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: bookinfo-gateway
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
"""

DESTINATION_RULE = """\
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: reviews
spec:
  host: reviews
  subsets:
  - name: v1
    labels: {version: v1}
  - name: v2
    labels: {version: v2}
"""

SUBSET_V3 = """\
  - name: v3
    labels: {version: v3}
"""


def virtual_service(v1: int, v2: int, weight_key: str = "weight") -> str:
    return f"""\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
spec:
  hosts: [reviews]
  gateways: [mesh, bookinfo-gateway]
  http:
  - name: split
    route:
    - destination: {{host: reviews, subset: v1}}
      weight: {v1}
    - destination: {{host: reviews, subset: v2}}
      {weight_key}: {v2}
"""


def application(repo: Path, name: str = "routing", path: str = "apps/routing") -> str:
    return f"""\
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {{name: {name}, namespace: argocd}}
spec:
  project: default
  source: {{repoURL: '{repo}', path: {path}, targetRevision: main}}
  destination: {{server: 'https://kubernetes.default.svc', namespace: default}}
"""


def routing_repo(path: Path) -> GitRepo:
    """main: the routing app with weights 80/20 and subsets v1, v2."""
    return make_repo(
        path,
        {
            "apps/routing/gateway.yaml": GATEWAY,
            "apps/routing/destination-rule.yaml": DESTINATION_RULE,
            "apps/routing/virtual-service.yaml": virtual_service(80, 20),
            "README.md": "routing\n",
        },
    )


def branch(repo: GitRepo, name: str, files: dict[str, str]) -> str:
    """A branch `name` off main with `files` changed; main stays checked out."""
    repo.git("checkout", "-q", "-b", name)
    commit = repo.commit(files, f"change on {name}")
    repo.git("checkout", "-q", "main")
    return commit


def live_store(path: Path, *texts: str) -> DirectoryStore:
    register_gitops_kinds()
    store = DirectoryStore(path)
    for i, text in enumerate(texts):
        store.apply(read_text(text, f"live-{i}.yaml").documents)
    return store
