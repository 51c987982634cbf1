"""YAML building blocks for the listener tests: a client pod and small services."""

from __future__ import annotations

CLIENT = "sleep-5b7c8d9f6-abcde.demo"

CLIENT_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: sleep-5b7c8d9f6-abcde
  namespace: demo
  labels: {app: sleep, version: v1, security.istio.io/tlsMode: istio}
spec:
  serviceAccountName: sleep
  containers: [{name: sleep, image: curl}]
status: {podIP: 10.1.0.9}
"""


def service(
    name: str,
    ports: str,
    cluster_ip: str,
    namespace: str = "demo",
    selector: str | None = None,
) -> str:
    """A Kubernetes Service; `ports` is the YAML flow list of its ports, `cluster_ip` an
    IP or "None" (headless)."""
    return (
        "\n".join(
            [
                "apiVersion: v1",
                "kind: Service",
                f"metadata: {{name: {name}, namespace: {namespace}}}",
                "spec:",
                f"  clusterIP: {cluster_ip!r}"
                if cluster_ip == "None"
                else f"  clusterIP: {cluster_ip}",
                f"  selector: {{{selector or 'app: ' + name}}}",
                f"  ports: {ports}",
            ]
        )
        + "\n"
    )


def pod(name: str, ip: str, labels: str, namespace: str = "demo") -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
  labels: {{{labels}}}
spec:
  containers: [{{name: app, image: app}}]
status: {{podIP: {ip}}}
"""


def join(*docs: str) -> str:
    return "---\n".join(docs)
