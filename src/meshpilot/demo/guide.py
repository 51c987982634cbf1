"""What `meshpilot demo` prints once the mesh is up: the pods, the requests to try (as
commands to paste) and where to look."""

from __future__ import annotations

import shlex

from meshpilot.demo.mesh import DemoMesh
from meshpilot.demo.processes import shown
from meshpilot.demo.topology import API_HOST, EGRESS_HOST, INGRESS_HOST, UNREGISTERED_HOST, Role

__all__ = ["guide"]

_ROLES = {
    Role.HTTP: "HTTP app {app} {version}{sidecar}",
    Role.TCP: "TCP echo {app}{sidecar}",
    Role.CLIENT: "no app, sidecar{capture}: send requests from here",
    Role.ROUTER: "gateway (Envoy router, no capture)",
    Role.EXTERNAL: "external server, outside the mesh (no sidecar)",
}


def _pods(mesh: DemoMesh) -> list[str]:
    lines = []
    for name, pod in mesh.pods.items():
        work = mesh.workloads[name]
        capture = " (interceptionMode NONE)" if mesh.loopback else " (capture)"
        sidecar = "" if mesh.loopback else " + sidecar (capture)"
        what = _ROLES[work.role].format(
            app=work.app, version=work.version, sidecar=sidecar, capture=capture
        )
        where = pod.netns or "(host)"
        lines.append(f"  {pod.key:<36} {pod.ip!s:<13} {where:<44} {what}")
    return lines


def _curl(mesh: DemoMesh, pod: str, url: str, *options: str) -> str:
    """curl as an app in `pod` would send it: inside its namespace (capture does the
    rest), or on the loopback to the sidecar's 127.0.0.1 listener for the URL's port."""
    words = ["curl", "-s", *options]
    if mesh.loopback:
        host_port = url.split("/")[2]
        port = host_port.rpartition(":")[2] if ":" in host_port else "80"
        words += ["--connect-to", f"{host_port}:127.0.0.1:{port}"]
        return "  " + shlex.join([*words, url])
    return f"  ip netns exec {mesh.pods[pod].netns} " + shlex.join([*words, url])


def _client(mesh: DemoMesh, *args: str) -> str:
    assert mesh.workspace is not None
    argv = [mesh.python, str(mesh.workspace.client), *mesh.client_args(*args)]
    prefix = "" if mesh.loopback else f"ip netns exec {mesh.pods['client'].netns} "
    return "  " + prefix + shlex.join(argv)


def _try(mesh: DemoMesh) -> list[str]:
    assert mesh.workspace is not None
    ip, port = mesh.ingress
    ports = mesh.topology.ports
    reviews, ratings = f"http://reviews:{ports.http}/", f"http://ratings:{ports.http}"
    ext = "" if ports.external == 80 else f":{ports.external}"
    code = "-w", r"  [HTTP %{http_code}]\n"
    lines = [
        "  # HTTPS through the ingress gateway, verified with the demo's CA",
        f"  curl --cacert {mesh.workspace.ca_file} --resolve {INGRESS_HOST}:{port}:{ip} "
        f"https://{INGRESS_HOST}:{port}/productpage",
        "  # pod to pod by service name, mTLS between sidecars: 80% v1, 20% v2; jason gets v2",
        _curl(mesh, "client", reviews),
        _curl(mesh, "client", reviews, "-H", "end-user: jason"),
        _client(mesh, "http", reviews, "--count", "100"),
        "  # TCP",
        _client(mesh, "tcp", "tcp-echo", str(ports.tcp), "hello"),
        "  # retries (503 without them), fault abort (418) and delay (1s), timeout (504)",
        _curl(mesh, "client", f"{ratings}/flaky", "-H", "x-demo-retries: off", *code),
        _curl(mesh, "client", f"{ratings}/flaky", *code),
        _curl(mesh, "client", f"{ratings}/", "-H", "x-demo-fault: abort", *code),
        _curl(mesh, "client", f"{ratings}/", "-H", "x-demo-fault: delay", *code),
        _curl(mesh, "client", f"{ratings}/slow?ms=3000", *code),
        "  # an external host by ServiceEntry: directly, and through the egress gateway",
        "  # (sidecar -> egress gateway over mTLS: the answer names caller=<client's SPIFFE id>)",
        _curl(mesh, "client", f"http://{API_HOST}{ext}/"),
        _curl(mesh, "client", f"http://{EGRESS_HOST}{ext}/"),
    ]
    if not mesh.loopback:
        lines += [
            "  # outbound policy: ALLOW_ANY passes an unregistered host, REGISTRY_ONLY: 502",
            _curl(mesh, "client", f"http://{UNREGISTERED_HOST}{ext}/", *code),
            _curl(mesh, "client-locked", f"http://{UNREGISTERED_HOST}{ext}/", *code),
        ]
    return lines


def _look(mesh: DemoMesh) -> list[str]:
    assert mesh.workspace is not None and mesh.control is not None
    url = mesh.control.url
    discovery = [] if url.endswith(":15014") else ["--discovery", url]
    admin = f"http://127.0.0.1:{mesh.agent_ports['client'].admin}"
    envoy = shlex.join(["meshpilot", "proxy-config", "clusters", "--admin", admin])
    if not mesh.loopback:
        envoy = f"ip netns exec {mesh.pods['client'].netns} {envoy}"
    config = mesh.workspace.config.path
    return [
        f"  control plane:    {shown(mesh.control.argv)}",
        f"  sync status:      {url}/debug/syncz   (also /debug/configz, /debug/registryz)",
        f"  a proxy's config: {url}/debug/config_dump?proxyID=client.default",
        "  " + shlex.join(["meshpilot", "proxy-status", *discovery]),
        "  " + shlex.join(["meshpilot", "proxy-config", "routes", "client.default", *discovery]),
        f"  Envoy itself:     {envoy}",
        f"  its certificate:  {envoy.replace(' clusters ', ' secret ')}",
        f"  mesh CA root:     {mesh.workspace.root_cert} (the apps' lines show caller=<SPIFFE id>"
        " over mTLS)",
        f"  edit the mesh:    {config}/reviews.yaml (traffic follows within a second),",
        f"                    ratings.yaml, egress.yaml, ...; pod logs: {mesh.pods_dir}",
        *_web_ui(mesh),
    ]


def _web_ui(mesh: DemoMesh) -> list[str]:
    if mesh.web_ui is None:
        return []
    ui = mesh.web_ui
    return [
        f"  web UI:           {ui.url}mesh  (user admin, password in {ui.password_file});",
        f"                    the request path: {ui.url}mesh/explain?from=client.default"
        "&url=http://reviews:9080/",
    ]


def _head(mesh: DemoMesh) -> list[str]:
    if mesh.loopback:
        return [
            f"No network-namespace pods here ({mesh.fallback_reason}).",
            'Fallback: sidecars without capture (interceptionMode NONE). "Pods" are addresses',
            "on this host's loopback; apps call the client sidecar's 127.0.0.1 listeners with",
            "the service's name as Host. Only the client has a sidecar; the gateways listen on",
            "0.0.0.0 (their ports below). ALLOW_ANY/REGISTRY_ONLY need capture: not shown.",
        ]
    bridge = getattr(mesh.cluster, "bridge", None)
    where = (
        f" on bridge {bridge.name} ({bridge.subnet}, host side {bridge.gateway})" if bridge else ""
    )
    return [f"Demo mesh: pods are network namespaces{where}, with capture rules and sidecars."]


def guide(mesh: DemoMesh) -> str:
    sections = [
        *_head(mesh),
        "",
        "Pods:",
        *_pods(mesh),
        "",
        "Try" + ("" if mesh.loopback else " (as root)") + ":",
        *_try(mesh),
        "",
        "Look:",
        *_look(mesh),
    ]
    return "\n".join(sections)
