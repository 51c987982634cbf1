"""Start one injected pod as a network-namespace pod, as kubelet would start it.

Order: the namespace (runtime.Cluster), its /etc/hosts (the pod's name and the Services'
cluster IPs: the stand-in for cluster DNS), the volumes filled (plan.py says what each
is), the init containers run to completion in order (istio-init's capture with the pod's
proxy user, access.py), then the containers in their order, each started and its
postStart hook run to success before the next (with holdApplicationUntilProxyStarts the
proxy is first and its hook is `meshpilot proxy wait`). The pod is ready when its proxy
answers 200 on 15021 /healthz/ready (at once without a proxy). Logs: `<pod dir>/<container>.log`.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshpilot.runtime.cluster import Cluster
from meshpilot.runtime.netns import NETNS_ETC, write_netns_etc
from meshpilot.runtime.pod import Pod, PodError, PodSpec, RunAs
from meshpilot.runtime.run.access import MeshAccess, agent_argv, capture_argv, meshpilot_argv
from meshpilot.runtime.run.env import PodFacts
from meshpilot.runtime.run.plan import ContainerPlan, PodPlan, VolumePlan, plan_pod
from meshpilot.runtime.run.revisions import pod_revision, revision_socket
from meshpilot.runtime.run.workloads import PodToRun
from meshpilot.security.files import ensure_private_dir, write_private
from meshpilot.security.tokens import issue_token
from meshpilot.settings import Ports

__all__ = ["PodStarter", "RunningPod"]

JSON = dict[str, Any]
HEALTH_PORT = Ports().health
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(slots=True)
class RunningPod:
    item: PodToRun
    pod: Pod
    plan: PodPlan
    agent_dir: Path | None = None  # the proxy agent's --work-dir, once started

    @property
    def key(self) -> str:
        return self.pod.key

    def ready(self) -> bool:
        if self.plan.proxy is None:
            return True
        try:
            url = f"http://{self.pod.ip}:{HEALTH_PORT}/healthz/ready"
            with _OPENER.open(url, timeout=1) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def exited(self) -> str:
        """Why the pod is broken: a container that exited, with its log's end ("" if none)."""
        for process in self.pod.processes:
            if not process.running:
                log = process.log.read_text(errors="replace")[-1500:]
                return f"container {process.role} exited with {process.popen.returncode}:\n{log}"
        return ""


def _user(container: JSON, pod: JSON) -> RunAs | None:
    """The container's runAsUser/runAsGroup (the pod's as default); None: root."""
    merged = {**((pod.get("spec") or {}).get("securityContext") or {}),
              **(container.get("securityContext") or {})}  # fmt: skip
    uid = merged.get("runAsUser")
    if not isinstance(uid, int) or uid == 0:
        return None
    gid = merged.get("runAsGroup")
    return RunAs(uid, gid if isinstance(gid, int) else uid)


class PodStarter:
    """Starts and stops injected pods in `cluster`; agents' files under `agent_root`."""

    def __init__(
        self, cluster: Cluster, access: MeshAccess, agent_root: Path, ready_timeout: float = 60.0
    ) -> None:
        self.cluster = cluster
        self.access = access
        self.agent_root = agent_root
        self.ready_timeout = ready_timeout
        self._agents = 0
        self.revision_wait = min(ready_timeout, 30.0)  # for a named revision's control plane

    def start(self, item: PodToRun, hosts: Mapping[str, Sequence[str]]) -> RunningPod:
        """The pod started and ready; PodError naming the pod and container otherwise
        (what was started is stopped again)."""
        running = self.create(item, hosts)
        try:
            self.launch(running)
            self.wait_ready(running)
        except BaseException:
            self.stop(running)
            raise
        return running

    def create(self, item: PodToRun, hosts: Mapping[str, Sequence[str]]) -> RunningPod:
        """Kubelet's sandbox: the namespace with its /etc/hosts and sysctls, the volumes
        that need no control plane, the init containers (the capture) run to completion."""
        labels = (item.pod.get("metadata") or {}).get("labels") or {}
        pod = self.cluster.add_pod(PodSpec(name=item.name, namespace=item.namespace,
                                           labels=labels))  # fmt: skip
        try:
            return self._create(item, pod, hosts)
        except BaseException:
            self.stop_pod(pod)
            raise

    def _create(self, item: PodToRun, pod: Pod, hosts: Mapping[str, Sequence[str]]) -> RunningPod:
        current = (NETNS_ETC / pod.netns / "hosts").read_text()
        extra = "".join(f"{ip}\t{' '.join(names)}\n" for ip, names in hosts.items())
        write_netns_etc(pod.netns, {"hosts": current + extra})
        spec = item.pod.get("spec") or {}
        for sysctl in (spec.get("securityContext") or {}).get("sysctls") or []:
            setting = f"{sysctl.get('name')}={sysctl.get('value')}"
            result = pod.exec(["sysctl", "-qw", setting])
            if result.returncode != 0:
                raise PodError(f"pod {pod.key}: sysctl {setting}: {result.stderr.strip()}")
        plan = plan_pod(item.pod, PodFacts(item.name, item.namespace, str(pod.ip)), pod.workdir)
        for volume in plan.volumes:
            self._fill(volume, item)
        for init in plan.init_containers:
            argv = capture_argv(init.argv, pod.proxy_user) if init.name == "istio-init" \
                else meshpilot_argv(init.argv)  # fmt: skip
            result = pod.exec(argv, _user(_raw(spec, "initContainers", init.name), item.pod),
                              init.env, timeout=60)  # fmt: skip
            if result.returncode != 0:
                output = (result.stdout + result.stderr).strip()[-1500:]
                raise PodError(f"pod {pod.key}: init container {init.name} exited with "
                               f"{result.returncode}: {output}")  # fmt: skip
        return RunningPod(item, pod, plan)

    def launch(self, running: RunningPod) -> None:
        """The token and mesh root (the control plane is up by now), then the containers
        in their order, each one's postStart hook done before the next starts."""
        for volume in running.plan.volumes:
            self._fill_secrets(volume, running.item)
        spec = running.item.pod.get("spec") or {}
        for container in running.plan.containers:
            self._container(running, container, _raw(spec, "containers", container.name))

    def _fill(self, volume: VolumePlan, item: PodToRun) -> None:
        volume.path.mkdir(parents=True, exist_ok=True)
        volume.path.chmod(0o755)
        for name, content in volume.files.items():
            (volume.path / name).write_text(content + "\n")

    def _fill_secrets(self, volume: VolumePlan, item: PodToRun) -> None:
        if volume.kind == "ca-root":
            shutil.copyfile(self.access.root_cert, volume.path / "root-cert.pem")
        elif volume.kind == "token":  # kubelet's projected token: a secret, 0600 for the agent
            ensure_private_dir(volume.path)
            account = (item.pod.get("spec") or {}).get("serviceAccountName") or "default"
            token = issue_token(self.access.ca_dir, item.namespace, account, item.name)
            write_private(volume.path / volume.token_file, token.encode())

    def _container(self, running: RunningPod, container: ContainerPlan, raw: JSON) -> None:
        pod = running.pod
        if container.name == "istio-proxy":
            self._agents += 1
            work_dir = self.agent_root / str(self._agents)  # short: Unix socket paths
            work_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
            running.agent_dir = work_dir
            argv = agent_argv(container.argv, self.access, pod.proxy_user, work_dir,
                              self.socket_of(running.item))  # fmt: skip
            pod.spawn(container.name, argv, None, container.env, cwd=work_dir)
        else:
            user = _user(raw, running.item.pod)
            pod.spawn(container.name, meshpilot_argv(container.argv), user, container.env)
        if container.post_start:
            self._post_start(running, container)

    def socket_of(self, item: PodToRun) -> Path:
        """The TLS socket of the control plane of the revision that injected the pod."""
        revision = item.revision or pod_revision(item.pod)
        # A revision just installed may still be starting (its pods come from the same
        # install): wait for its control plane, as the pod's agent would retry istiod-<R>.
        deadline = time.monotonic() + (self.revision_wait if revision not in ("", "default")
                                       else 0)  # fmt: skip
        while (socket := revision_socket(self.access.ca_dir, revision)) is None:
            if time.monotonic() >= deadline:
                return self.access.secure_socket
            time.sleep(0.2)
        return socket

    def _post_start(self, running: RunningPod, container: ContainerPlan) -> None:
        """Run the hook to success; a container that exits meanwhile fails it at once."""
        argv = running.pod.command(meshpilot_argv(container.post_start), None, container.env)
        where = f"pod {running.key}: container {container.name}: postStart"
        hook = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + self.ready_timeout + 10
        try:
            while hook.poll() is None:
                if problem := running.exited():
                    raise PodError(f"{where} stopped: {problem}")
                if time.monotonic() > deadline:
                    raise PodError(f"{where} still running after {self.ready_timeout + 10:g}s")
                time.sleep(0.1)
        finally:
            if hook.poll() is None:
                hook.kill()
            output = hook.communicate()[0].decode(errors="replace").strip()[-1500:]
        if hook.returncode != 0:
            raise PodError(f"{where} exited with {hook.returncode}: {output}")

    def wait_ready(self, running: RunningPod) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while not running.ready():
            if problem := running.exited():
                raise PodError(f"pod {running.key}: {problem}")
            if time.monotonic() > deadline:
                raise PodError(f"pod {running.key}: not ready after {self.ready_timeout:g}s")
            time.sleep(0.1)

    def stop(self, running: RunningPod) -> None:
        self.stop_pod(running.pod)

    def stop_pod(self, pod: Pod) -> None:
        if pod.key in self.cluster.pods:
            self.cluster.remove_pod(pod.key)


def _raw(spec: JSON, field: str, name: str) -> JSON:
    return next((c for c in spec.get(field) or [] if c.get("name") == name), {})
