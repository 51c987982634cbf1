"""Benchmark (not a test): a commit touching N apps, one VirtualService each, in a mesh of N
services with one sidecar each; prints the time `run_preview` takes.

    .venv/bin/python -m tests.unit.gitops.preview.bench_preview 100
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from meshpilot.gitops.preview import PreviewDeps, PreviewRequest, render_markdown, run_preview
from meshpilot.gitops.render import Renderer, RendererConfig
from meshpilot.gitops.repo import RepoService
from tests.gitops_fixtures import make_repo
from tests.unit.gitops.preview.mesh_fixtures import application, branch, live_store

WORKLOAD = """\
apiVersion: v1
kind: Service
metadata: {{name: svc, namespace: ns{i}}}
spec:
  clusterIP: 10.96.{a}.{b}
  selector: {{app: svc}}
  ports: [{{name: http, port: 8080}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: svc-{i}
  namespace: ns{i}
  labels: {{app: svc, version: v1, security.istio.io/tlsMode: istio}}
status: {{podIP: 10.20.{a}.{b}}}
"""

VS = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: svc, namespace: ns{i}}}
spec:
  hosts: [svc]
  http:
  - route:
    - destination: {{host: svc}}
    timeout: {t}s
"""


def main(n: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="meshpilot-bench-"))
    numbering = [dict(i=i, a=i // 200, b=i % 200 + 1) for i in range(n)]
    repo = make_repo(tmp / "repo", {f"apps/a{i}/vs.yaml": VS.format(i=i, t=5) for i in range(n)})
    apps = [
        application(repo.path, f"a{i}", f"apps/a{i}").replace(
            "namespace: default}", f"namespace: ns{i}}}"
        )
        for i in range(n)
    ]
    workloads = "---\n".join(WORKLOAD.format(**k) for k in numbering)
    store = live_store(tmp / "store", workloads, "---\n".join(apps))
    branch(repo, "all", {f"apps/a{i}/vs.yaml": VS.format(i=i, t=7) for i in range(n)})
    renderer = Renderer(RepoService(tmp / "cache"), RendererConfig(temp_dir=tmp))
    start = time.perf_counter()
    request = PreviewRequest(str(repo.path), "main", "all")
    report = run_preview(request, PreviewDeps(renderer, store.snapshot()))
    took = time.perf_counter() - start
    print(
        f"{n} apps: {took:.2f}s; {report.changed_proxies} proxies change, "
        f"{report.unchanged_proxies} unchanged; markdown {len(render_markdown(report))} chars"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
