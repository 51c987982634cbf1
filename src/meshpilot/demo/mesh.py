"""`DemoMesh`: the whole demo on one machine, up in `start()` and gone after `close()`.

    with DemoMesh(DemoOptions()) as mesh:
        mesh.get("client", "http://reviews:9080/")

Order of start: private workspace and certificate; the pods (runtime.Cluster: network
namespaces on a bridge), each an injected Pod object (injected.py) whose namespace,
/etc/hosts, volumes and capture (istio-init) `meshpilot run`'s runner sets up first; the
mesh YAML with the pods' addresses; `meshpilot discovery` on loopback; then each pod's
containers (the app, the istio-proxy agent of sidecars and gateways); readiness of every
proxy. `close()`
undoes all of it, also after a failed start, an exception, Ctrl-C or SIGTERM (the Cluster
turns SIGTERM into SystemExit).

Without root, iproute2 or iptables, `DemoOptions(loopback=None)` falls back to "pods" on
the host's loopback (hostpods.py), without capture: see `Topology(loopback=True)`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from ipaddress import IPv4Address, ip_address
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

from meshpilot.demo import pods as podlib
from meshpilot.demo.certs import GatewayCertificate, make_gateway_certificate
from meshpilot.demo.hostpods import HostPods
from meshpilot.demo.injected import demo_pod, injected_pods
from meshpilot.demo.manifests import dump, mesh_files, pod_objects
from meshpilot.demo.options import DemoOptions, free_port, loopback_ports, use_loopback
from meshpilot.demo.pods import AgentPorts, DemoPod, MeshAccess
from meshpilot.demo.processes import ControlPlane, DemoError, tail
from meshpilot.demo.topology import (
    API_HOST,
    EGRESS_HOST,
    INGRESS_HOST,
    INGRESS_POD,
    UNREGISTERED_HOST,
    Role,
    Topology,
    Workload,
)
from meshpilot.demo.web_ui import WebUi
from meshpilot.demo.workspace import Workspace, script_python
from meshpilot.errors import MeshpilotError
from meshpilot.inject.config import Injector
from meshpilot.runtime.cluster import Cluster, ClusterConfig
from meshpilot.runtime.run.access import MeshAccess as RunAccess
from meshpilot.runtime.run.runner import PodStarter, RunningPod
from meshpilot.runtime.tokens import TOKEN_PATH, project_token

__all__ = ["DemoMesh", "DemoOptions"]


@dataclass
class DemoMesh:
    options: DemoOptions = field(default_factory=DemoOptions)
    loopback: bool = False  # decided by start(): the fallback without namespaces
    topology: Topology = field(default_factory=Topology)
    workspace: Workspace | None = None
    cluster: Cluster | HostPods | None = None
    control: ControlPlane | None = None
    web_ui: WebUi | None = None
    cert: GatewayCertificate | None = None
    pods: dict[str, DemoPod] = field(default_factory=dict)  # by workload (pod) name
    workloads: dict[str, Workload] = field(default_factory=dict)
    agent_ports: dict[str, AgentPorts] = field(default_factory=dict)
    python: str = field(default_factory=script_python)
    fallback_reason: str = ""
    agents_started: int = 0
    agent_dirs: dict[str, Path] = field(default_factory=dict)  # agents' --work-dir by pod
    starter: PodStarter | None = None  # in namespaces: the runner that starts the pods
    running: dict[str, RunningPod] = field(default_factory=dict)  # ... and what it started

    def __enter__(self) -> DemoMesh:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---------------------------------------------------------------- start and stop

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        self.loopback, self.fallback_reason = use_loopback(self.options.loopback)
        if self.loopback:
            self.topology = Topology(loopback_ports(), loopback=True)
        self.workspace = ws = Workspace.create()
        self.cert = make_gateway_certificate(INGRESS_HOST)
        ws.write_certificates(self.cert)
        if self.loopback:
            self.cluster = HostPods(ws.root / "pods")
        else:
            self.cluster = Cluster(ClusterConfig(name=self.options.cluster, stop_grace=2.0))
        self.cluster.start()
        workloads = [self.topology.external, *self.topology.workloads]
        if self.loopback:
            for work in workloads:
                self._add_pod(work)
        else:  # the pods of injected Pod objects, as `meshpilot run` starts them
            assert isinstance(self.cluster, Cluster)
            access = RunAccess(ws.secure_socket, ws.root_cert, ws.ca_dir)
            ready = self.options.ready_timeout
            self.starter = PodStarter(self.cluster, access, ws.root / "run", ready)
            for work in workloads:
                self._create_pod(work)
        for name, text in mesh_files(self.topology, self._mesh_pods(), self.external_ip).items():
            ws.config.write(name, text)
        self.control = ControlPlane(
            config=ws.config.path, socket=ws.socket, log=ws.discovery_log,
            xds_port=free_port(self.options.xds_port),
            monitoring_port=free_port(self.options.monitoring_port),
            ca_dir=ws.ca_dir, root_cert=ws.root_cert, secure_socket=ws.secure_socket,
            debounce=self.options.debounce,
        )  # fmt: skip
        self.control.start()
        if self.options.ui:
            self.web_ui = WebUi(
                store=ws.root / "store", state_dir=ws.root / "gitops",
                port=free_port(self.options.ui_port),
                discovery=f"127.0.0.1:{self.control.monitoring_port}",
                log=ws.root / "web-ui.log",
            )  # fmt: skip
            self.web_ui.start()
        for work in workloads:
            self._start_agent(work)
        self._wait_ready(workloads)

    def _create_pod(self, work: Workload) -> DemoPod:
        """The workload's Pod, injected, with its namespace and capture (no container yet)."""
        assert self.workspace is not None and self.starter is not None
        pod = demo_pod(work, self.python, self.workspace.app, self.options.envoy_log_level,
                       self.options.secret_ttl)  # fmt: skip
        (item,) = injected_pods([pod], Injector())
        running = self.starter.create(item, self._hosts() if work.in_mesh else {})
        self.running[work.name] = running
        self.pods[work.name] = running.pod
        self.workloads[work.name] = work
        return running.pod

    def _add_pod(self, work: Workload) -> DemoPod:
        """A pod on the loopback fallback (no namespaces: no runner, no injection)."""
        assert self.workspace is not None and isinstance(self.cluster, HostPods)
        ip = str(self.cluster.allocate())
        pod = self.cluster.add_pod(podlib.pod_spec(work, self.python, self.workspace.app, ip))
        self.pods[work.name] = pod
        self.workloads[work.name] = work
        return pod

    def _proxied(self, work: Workload) -> bool:
        """Whether the workload gets a proxy: every sidecar and gateway in pods; on the
        loopback only the client (the shared 127.0.0.1 sidecar) and the gateways."""
        if work.role is Role.ROUTER:
            return True
        return work.has_sidecar and (not self.loopback or work.role is Role.CLIENT)

    def _start_agent(self, work: Workload) -> None:
        assert self.workspace is not None
        if work.name in self.running:  # its containers, the proxy among them
            assert self.starter is not None
            running = self.running[work.name]
            self.starter.launch(running)
            if running.agent_dir is not None:
                self.agent_ports[work.name] = AgentPorts()
                self.agent_dirs[work.name] = running.agent_dir
            return
        if not self._proxied(work):
            return
        ports = None
        if self.loopback:
            admin, status, health, prometheus = (free_port() for _ in range(4))
            ports = AgentPorts(admin, status, health, prometheus)
        self.agent_ports[work.name] = ports or AgentPorts()
        pod = self.pods[work.name]
        ws = self.workspace
        # The pod's token, as kubelet projects it; the agent proves the pod's identity with it.
        project_token(ws.ca_dir, pod.workdir, work.namespace, work.app, work.name)
        access = MeshAccess(ws.secure_socket, ws.root_cert, self.options.secret_ttl)
        self.agents_started += 1  # each agent its own short working directory
        work_dir = self.agent_dirs[work.name] = ws.agent_dir(self.agents_started)
        podlib.start_agent(work, pod, access, work_dir, self.options.envoy_log_level, ports)

    def _health_url(self, pod: DemoPod) -> str:
        name = next(n for n, p in self.pods.items() if p is pod)
        host = "127.0.0.1" if self.loopback else str(pod.ip)
        return f"http://{host}:{self.agent_ports[name].health}/healthz/ready"

    def _wait_ready(self, workloads: list[Workload]) -> None:
        pods = [self.pods[w.name] for w in workloads]
        podlib.wait_ready(pods, self._health_url, self.options.ready_timeout)
        podlib.wait_listening((self.pods[w.name], w.port) for w in workloads)

    def _hosts(self) -> dict[str, list[str]]:
        hosts = self.topology.service_hosts()
        external = self.pods.get(self.topology.external.name)
        if external is not None:
            hosts[str(external.ip)] = [API_HOST, EGRESS_HOST, UNREGISTERED_HOST]
        return hosts

    def _mesh_pods(self) -> list[tuple[Workload, str]]:
        return [(w, str(self.pods[n].ip)) for n, w in self.workloads.items() if w.in_mesh]

    def close(self) -> None:
        """Stop everything and remove what was created; safe to call twice."""
        errors: list[str] = []
        try:
            if self.cluster is not None:
                podlib.stop_agents(self.pods.values())
                try:
                    self.cluster.close()
                except MeshpilotError as exc:
                    errors.append(str(exc))
                self.cluster = None
        finally:
            try:
                if self.web_ui is not None:
                    self.web_ui.stop()
                    self.web_ui = None
                if self.control is not None:
                    self.control.stop()
                    self.control = None
            finally:
                if self.workspace is not None:
                    self.workspace.remove()
                    self.workspace = None
                self.pods.clear()
                self.running.clear()
        if errors:
            raise DemoError("; ".join(errors))

    # ---------------------------------------------------------------- changes

    def add_pod(self, work: Workload) -> DemoPod:
        """Scale out: a new pod with its sidecar, ready, then its Pod object in the config
        (`scaled.yaml`), which callers learn by EDS."""
        pod = self._add_pod(work) if self.loopback else self._create_pod(work)
        self._start_agent(work)
        self._wait_ready([work])
        self._write_scaled()
        return pod

    def remove_pod(self, name: str) -> None:
        assert self.cluster is not None
        pod = self.pods.pop(name)
        del self.workloads[name]
        self.running.pop(name, None)
        self._write_scaled()
        podlib.stop_agents([pod])
        self.cluster.remove_pod(pod.key)

    def _write_scaled(self) -> None:
        assert self.workspace is not None
        base = {w.name for w in (*self.topology.workloads, self.topology.external)}
        extra = [(w, str(self.pods[n].ip)) for n, w in self.workloads.items() if n not in base]
        if extra:
            self.workspace.config.write("scaled.yaml", dump(pod_objects(extra)))
        else:
            self.workspace.config.remove("scaled.yaml")

    @contextmanager
    def edited(self, file: str, text: str) -> Iterator[None]:
        """Replace a config file for the block, then put the original back."""
        assert self.workspace is not None
        original = self.workspace.config.read(file)
        self.workspace.config.write(file, text)
        try:
            yield
        finally:
            self.workspace.config.write(file, original)

    # ---------------------------------------------------------------- looking and asking

    @property
    def external_ip(self) -> str:
        return str(self.pods[self.topology.external.name].ip)

    @property
    def pods_dir(self) -> str:
        """Where the pods' logs are (the runtime's temporary directory)."""
        pod = next(iter(self.pods.values()), None)
        return str(pod.workdir.parent) if pod is not None else ""

    @property
    def ingress(self) -> tuple[str, int]:
        """Where clients outside the mesh reach the ingress gateway's HTTPS listener."""
        host = "127.0.0.1" if self.loopback else str(self.pods[INGRESS_POD].ip)
        return host, self.topology.ports.ingress

    def token_file(self, name: str) -> Path:
        """The pod's token as its agent reads it (the projected istio-token volume)."""
        running = self.running.get(name)
        for volume in running.plan.volumes if running is not None else ():
            if volume.kind == "token":
                return volume.path / volume.token_file
        return self.pods[name].workdir / TOKEN_PATH

    def ip(self, name: str) -> IPv4Address:
        return self.pods[name].ip

    def client_args(self, *args: str) -> list[str]:
        """client.py's arguments as given (in pods, capture takes the traffic to the
        sidecar), or, on the loopback, aimed at the sidecar's 127.0.0.1 listener."""
        out = list(args)
        if not self.loopback or not out:
            return out
        if out[0] == "tcp":
            out[1] = "127.0.0.1"
        elif out[0] == "http" and not _is_ip(urlsplit(out[1]).hostname or ""):
            out += ["--connect", f"127.0.0.1:{urlsplit(out[1]).port or 80}"]
        return out

    def client(self, pod: str, *args: str, timeout: float = 60.0) -> dict[str, Any]:
        """Run client.py in a pod (as root: captured like any app) and parse its JSON."""
        assert self.workspace is not None
        argv = [self.python, str(self.workspace.client), *self.client_args(*args)]
        result = self.pods[pod].exec(argv, timeout=timeout)
        if result.returncode != 0:
            raise DemoError(f"client in {pod} failed: {result.stderr.strip()[-1000:]}")
        data: dict[str, Any] = json.loads(result.stdout)
        return data

    def get(self, pod: str, url: str, *headers: str, full: bool = False) -> tuple[int, str]:
        """One HTTP GET from inside a pod: (status, first line of the body, or all of it)."""
        args = [a for h in headers for a in ("-H", h)] + (["--full"] if full else [])
        counts = self.client(pod, "http", url, *args)["counts"]
        ((answer, _),) = counts.items()
        status, _, line = answer.partition(" ")
        return int(status), line

    def admin(self, pod: str, path: str) -> tuple[int, str]:
        """GET on the pod's Envoy admin (loopback only, so asked from inside the pod)."""
        return self.get(pod, f"http://127.0.0.1:{self.agent_ports[pod].admin}{path}", full=True)

    def stats(self, pod: str, pattern: str) -> dict[str, int]:
        """Envoy counters and gauges whose names match the regex `pattern`."""
        status, body = self.admin(pod, f"/stats?usedonly&filter={quote(pattern)}")
        if status != 200:
            raise DemoError(f"{pod}: /stats answered {status}: {body[:200]}")
        out = {}
        for line in body.splitlines():
            name, _, value = line.partition(": ")
            if value.strip().isdigit():
                out[name] = int(value)
        return out

    def envoy_pid(self, pod: str) -> int | None:
        agent = podlib.agent_process(self.pods[pod])
        return _child_named(agent.popen.pid, "envoy") if agent is not None else None

    def logs(self, name: str) -> str:
        return "\n".join(f"--- {p.role}.log\n{tail(p.log)}" for p in self.pods[name].processes)


def _is_ip(text: str) -> bool:
    try:
        ip_address(text)
    except ValueError:
        return False
    return True


def _child_named(pid: int, name: str, depth: int = 3) -> int | None:
    """A descendant process of `pid` whose command name is `name`."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        children = [int(c) for task in tasks for c in (task / "children").read_text().split()]
    except OSError:
        return None
    for child in children:
        try:
            if Path(f"/proc/{child}/comm").read_text().strip() == name:
                return child
        except OSError:
            continue
        if depth > 0 and (found := _child_named(child, name, depth - 1)) is not None:
            return found
    return None
