"""`meshpilot demo`: a bookinfo-like mesh on one machine, and the checks run against it
(the e2e tests drive the same code).

    topology.py    services, workloads, host names and ports of the demo
    routing.py     its DestinationRules and VirtualServices (one file per service)
    manifests.py   everything as Kubernetes/Istio YAML, and the watched config directory
    certs.py       the ingress gateway's CA and server certificate
    workspace.py   the private temporary directory
    processes.py   meshpilot commands as argv; the control plane process
    pods.py        pods: app, /etc/hosts, capture (istio-init), proxy agent, readiness
    hostpods.py    the fallback without network namespaces: "pods" on the loopback
    options.py     DemoOptions, the pods-or-loopback choice, free ports
    mesh.py        DemoMesh: all of it up, asked, changed and torn down
    checks.py      the requests `--check` sends, PASS/FAIL each
    guide.py       what the demo prints: pods, commands to try, where to look
    app.py         the apps (standard library only, run inside pods)
    client.py      requests from inside pods (standard library only)
"""

from __future__ import annotations

__all__: list[str] = []
