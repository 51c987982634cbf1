"""The demo's pods: their apps, the proxy agent, and readiness.

In network namespaces every pod is an injected Pod (injected.py) started by `meshpilot
run`'s runner: istio-init's capture, then the app as `nobody` and the istio-proxy agent as
root inside the pod, Envoy as the pod's own proxy user (a UID no other pod's proxy has,
group 1337), which capture lets through; gateways (routers) have no capture. So no pod's
proxy reaches another pod's SDS socket (a 0700 directory of its UID). On the loopback
fallback (hostpods.HostPod) pods are started here by hand: everything runs as the demo's
user and sidecars use interceptionMode NONE. Only what lives in the pods' namespaces and
the host's loopback is ever contacted.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path
from typing import Protocol

from meshpilot.demo.processes import (
    DemoError,
    http_get,
    meshpilot_argv,
    tail,
)
from meshpilot.demo.topology import Role, Workload
from meshpilot.runtime.pod import PodProcess, PodSpec, RunAs
from meshpilot.runtime.tokens import TOKEN_PATH
from meshpilot.settings import Ports

__all__ = [
    "NOBODY",
    "AgentPorts",
    "DemoPod",
    "MeshAccess",
    "agent_argv",
    "app_argv",
    "pod_spec",
    "start_agent",
    "stop_agents",
    "wait_ready",
]

NOBODY = RunAs(65534, 65534)
ROOT = RunAs(0, 0)
AGENT_ROLE = "sidecar"  # runtime.Pod's name for the proxy process
STATS_PREFIXES = ("cluster.outbound", "cluster.inbound", "http.", "listener.")
_ISTIO = Ports()


class DemoPod(Protocol):
    """What the demo uses of a pod: runtime.pod.Pod, or hostpods.HostPod on the fallback."""

    @property
    def key(self) -> str: ...

    @property
    def ip(self) -> IPv4Address: ...

    @property
    def proxy_user(self) -> RunAs: ...

    netns: str
    workdir: Path
    processes: list[PodProcess]

    def command(
        self, argv: Sequence[str], run_as: RunAs | None = None, env: Mapping[str, str] | None = None
    ) -> list[str]: ...

    def exec(
        self,
        argv: Sequence[str],
        run_as: RunAs | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 10.0,
    ) -> subprocess.CompletedProcess[str]: ...

    def start_sidecar(
        self, argv: Sequence[str], run_as: RunAs = ..., env: Mapping[str, str] | None = None
    ) -> PodProcess: ...

    def wait_listening(self, port: int, timeout: float = 5.0) -> None: ...


@dataclass(frozen=True, slots=True)
class AgentPorts:
    """A proxy's own ports: Istio's in a pod; free ones when pods share the loopback."""

    admin: int = _ISTIO.envoy_admin
    status: int = _ISTIO.agent_status
    health: int = _ISTIO.health
    prometheus: int = _ISTIO.prometheus

    def args(self) -> list[str]:
        return [
            "--admin-port", str(self.admin), "--status-port", str(self.status),
            "--health-port", str(self.health), "--prometheus-port", str(self.prometheus),
        ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class MeshAccess:
    """How agents reach the control plane: xDS and the CA over TLS on its Unix socket
    (pods in other network namespaces share the filesystem), verified against the mesh
    root; each pod proves its identity with the token the runtime put in its directory."""

    secure_socket: Path
    root_cert: Path
    secret_ttl: str = "24h"  # workload certificate lifetime (Istio's SECRET_TTL)

    def args(self, pod: DemoPod) -> list[str]:
        return [
            "--discovery-address", f"unix:{self.secure_socket}", "--tls",
            "--root-cert", str(self.root_cert),
            "--token-file", str(pod.workdir / TOKEN_PATH),
            "--secret-ttl", self.secret_ttl,
        ]  # fmt: skip


def app_argv(python: str, script: Path, work: Workload) -> tuple[str, ...]:
    if work.role not in (Role.HTTP, Role.TCP, Role.EXTERNAL):
        return ()
    kind = "tcp" if work.role is Role.TCP else "http"
    argv = [python, str(script), kind, "--service", work.app, "--version", work.version]
    argv += ["--pod", work.name, "--port", str(work.port)]
    if work.call:
        argv += ["--call", work.call]
    if work.call_host:
        argv += ["--call-host", work.call_host]
    return tuple(argv)


def pod_spec(work: Workload, python: str, script: Path, loopback_ip: str) -> PodSpec:
    """A pod on the loopback: the app binds its own address (namespaced pods are injected
    Pods started by the runner: injected.py)."""
    app = app_argv(python, script, work)
    app = (*app, "--bind", loopback_ip) if app else ()
    return PodSpec(name=work.name, namespace=work.namespace, ip=loopback_ip, app=app)


def agent_argv(
    work: Workload,
    pod: DemoPod,
    access: MeshAccess,
    work_dir: Path,
    log_level: str,
    ports: AgentPorts | None,
) -> list[str]:
    """`meshpilot proxy sidecar|router ...` for a pod; `ports` given: the loopback
    fallback (these ports, interceptionMode NONE)."""
    kind = "router" if work.role is Role.ROUTER else "sidecar"
    labels = [arg for key, value in work.labels.items() for arg in ("--label", f"{key}={value}")]
    extra = ports.args() if ports is not None else []
    if ports is not None and kind == "sidecar":
        extra += ["--interception-mode", "NONE"]
    if ports is None:  # in a namespace: Envoy as the pod's own user, gateways too
        user = pod.proxy_user
        extra += ["--run-as-proxy-uid", "--proxy-uid", str(user.uid), "--proxy-gid", str(user.gid)]
    return meshpilot_argv(
        "proxy", kind,
        "--pod", work.key,
        "--ip", str(pod.ip),
        *labels,
        "--service-account", work.app,
        *access.args(pod),
        "--concurrency", "1",
        "--drain-time-s", "1",
        "--parent-shutdown-time-s", "2",
        "--termination-drain-duration", "100ms",
        "--work-dir", str(work_dir),
        "--log-level", log_level,
        # Istio keeps per-cluster and per-listener stats off by default; the demo shows them
        # (as the sidecar.istio.io/statsInclusionPrefixes annotation would).
        *(arg for prefix in STATS_PREFIXES for arg in ("--stats-inclusion-prefix", prefix)),
        *extra,
    )  # fmt: skip


def start_agent(
    work: Workload,
    pod: DemoPod,
    access: MeshAccess,
    work_dir: Path,
    log_level: str,
    ports: AgentPorts | None = None,
) -> PodProcess:
    """The agent as root in the pod: it writes the bootstrap and runs Envoy as the pod's
    proxy user (which capture lets out). On the loopback fallback it runs as the demo's
    user."""
    return pod.start_sidecar(agent_argv(work, pod, access, work_dir, log_level, ports), run_as=ROOT)


def agent_process(pod: DemoPod) -> PodProcess | None:
    """The proxy agent: started by hand (loopback) or as an injected istio-proxy."""
    return next((p for p in pod.processes if p.role in (AGENT_ROLE, "istio-proxy")), None)


def _exited(pod: DemoPod) -> str:
    for process in pod.processes:
        if not process.running:
            code = process.popen.returncode
            return f"pod {pod.key}: its {process.role} exited with {code}:\n{tail(process.log)}"
    return ""


def wait_ready(
    pods: Iterable[DemoPod], health_url: Callable[[DemoPod], str], timeout: float
) -> None:
    """Every pod's proxy ready (/healthz/ready on its health port, from the host); a
    DemoError with the log of what failed otherwise."""
    waiting = {pod.key: pod for pod in pods if agent_process(pod) is not None}
    deadline = time.monotonic() + timeout
    while waiting:
        for key, pod in list(waiting.items()):
            if problem := _exited(pod):
                raise DemoError(problem)
            if http_get(health_url(pod), 1)[0] == 200:
                del waiting[key]
        if waiting and time.monotonic() > deadline:
            logs = [f"--- {k}:\n{tail(agent.log, 1500)}" for k, p in waiting.items()
                    if (agent := agent_process(p)) is not None]  # fmt: skip
            raise DemoError(
                f"proxies not ready after {timeout:g}s: {sorted(waiting)}\n" + "\n".join(logs)
            )
        time.sleep(0.1)


def wait_listening(pods: Iterable[tuple[DemoPod, int]], timeout: float = 10.0) -> None:
    for pod, port in pods:
        if port:
            pod.wait_listening(port, timeout)


def stop_agents(pods: Iterable[DemoPod], grace: float = 5.0) -> None:
    """SIGTERM every agent at once (each drains and stops its Envoy), so that the cluster's
    one-by-one teardown finds them gone."""
    agents = [a for pod in pods if (a := agent_process(pod)) is not None and a.running]
    for agent in agents:
        agent.popen.terminate()
    deadline = time.monotonic() + grace
    for agent in agents:
        with contextlib.suppress(subprocess.TimeoutExpired):  # then the teardown kills it
            agent.popen.wait(max(0.0, deadline - time.monotonic()))
