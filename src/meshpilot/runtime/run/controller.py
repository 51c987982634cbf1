"""The Deployment controller's and kubelet's stand-in: the store's Deployments kept running.

Each watched Deployment's pods (workloads.py: names from the template's hash, injected by
the store's injector and namespace labels) are compared with the running ones; the
difference is closed one pod at a time, as a RollingUpdate with maxSurge 1 and
maxUnavailable 0: a new pod is started and ready before an old one goes. A changed
template (`kubectl.kubernetes.io/restartedAt`, set by `meshpilot rollout restart`) thus
replaces every pod; a changed replica count starts or stops the difference.

A ready pod is published to the store as a Pod with its status (podIP, Ready), which is
how the control plane's registry gives it to Services' endpoints. A pod going is first
marked terminating in the store (deletionTimestamp, not Ready: no longer an endpoint, its
labels still known, so a gateway keeps its listeners), stopped after `drain` seconds
(callers have dropped the endpoint by then), then deleted from the store.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.core import Namespace
from meshpilot.config.kube.service import Service
from meshpilot.config.yaml_source import RawDocument
from meshpilot.errors import MeshpilotError
from meshpilot.inject.store_injector import StoreInjector
from meshpilot.runtime.run.revisions import RevisionInjectors
from meshpilot.runtime.run.runner import PodStarter, RunningPod
from meshpilot.runtime.run.workloads import PodToRun, pods_of
from meshpilot.store.base import WatchedStore

__all__ = ["Controller", "DeploymentRef"]

JSON = dict[str, Any]
ORIGIN = "<meshpilot run>"


@dataclass(frozen=True, slots=True, order=True)
class DeploymentRef:
    namespace: str
    name: str

    @property
    def key(self) -> ConfigKey:
        return ConfigKey(Kind.DEPLOYMENT, self.namespace, self.name)


class Controller:
    """Runs pods for the store's Deployments (and given bare Pods); `close()` stops all."""

    def __init__(
        self,
        store: WatchedStore,
        starter: PodStarter,
        echo: Callable[[str], None],
        drain: float = 2.0,
    ) -> None:
        self.store = store
        self.starter = starter
        self.echo = echo
        self.drain = drain
        self.injector = StoreInjector(store)
        self.revision_injectors = RevisionInjectors(store)  # a pod's revision picks its own
        self.pods: dict[str, RunningPod] = {}  # by pod key (name.namespace)
        self.owners: dict[str, DeploymentRef | None] = {}  # pod key → its Deployment
        self.stopping = threading.Event()  # set: no further step is taken
        self._reported: set[tuple[str, str]] = set()  # (pod key, container) seen exited

    # ---------------------------------------------------------------- what should run

    def _namespace_labels(self) -> dict[str, dict[str, str]]:
        snapshot = self.store.snapshot()
        return {obj.name: dict(obj.model.metadata.labels) for obj in
                snapshot.of_kind(Kind.NAMESPACE) if isinstance(obj.model, Namespace)}  # fmt: skip

    def hosts(self) -> dict[str, list[str]]:
        """/etc/hosts lines for the store's Services with a cluster IP (no cluster DNS)."""
        out: dict[str, list[str]] = {}
        for obj in self.store.snapshot().of_kind(Kind.SERVICE):
            model = obj.model
            if not isinstance(model, Service):
                continue
            ip = model.spec.cluster_ip
            if ip and ip != "None":
                name, ns = obj.name, obj.key.namespace
                out.setdefault(ip, []).extend(
                    [name, f"{name}.{ns}", f"{name}.{ns}.svc", f"{name}.{ns}.svc.cluster.local"]
                )
        return out

    def desired(self, documents: Iterable[JSON]) -> list[PodToRun]:
        pods = pods_of(documents, self.injector(), self._namespace_labels(),
                       choose=self.revision_injectors)  # fmt: skip
        return [replace(p, revision=self.revision_injectors.revision_of(p.pod)) for p in pods]

    # ---------------------------------------------------------------- starting, stopping

    def start(self, item: PodToRun, owner: DeploymentRef | None) -> None:
        running = self.starter.start(item, self.hosts())
        self.pods[running.key] = running
        self.owners[running.key] = owner
        self._publish(running)
        how = "sidecar injected" if item.injected else f"no sidecar: {item.reason}"
        where = running.pod.workdir
        self.echo(f"pod {item.namespace}/{item.name} ready at {running.pod.ip} ({how}), "
                  f"logs in {where}")  # fmt: skip

    def retire(self, key: str) -> None:
        running = self.pods.pop(key)
        self.owners.pop(key, None)
        try:
            self._withdraw(running)
            time.sleep(self.drain)
        finally:
            self.starter.stop(running)
            self._remove(running)
            self.echo(f"pod {running.item.namespace}/{running.item.name} stopped")

    def _publish(self, running: RunningPod) -> None:
        manifest = copy.deepcopy(running.item.pod)
        manifest.setdefault("metadata", {}).pop("resourceVersion", None)
        ip = str(running.pod.ip)
        manifest["status"] = {
            "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "127.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}],
        }  # fmt: skip
        self.store.apply([RawDocument(ORIGIN, 1, manifest, {})], durable=False)

    def _withdraw(self, running: RunningPod) -> None:
        """Terminating, as kubelet shows it: not ready (no longer an endpoint), but still
        in the store, so the control plane keeps its labels (a gateway keeps its listeners
        while it drains)."""
        key = ConfigKey(Kind.POD, running.item.namespace, running.item.name)
        manifest = self.store.manifest(key)
        if manifest is None:
            return
        manifest = copy.deepcopy(manifest)
        meta = manifest.setdefault("metadata", {})
        meta.pop("resourceVersion", None)
        meta["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        manifest.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": "False"}]
        self.store.apply([RawDocument(ORIGIN, 1, manifest, {})], durable=False)

    def _remove(self, running: RunningPod) -> None:
        key = ConfigKey(Kind.POD, running.item.namespace, running.item.name)
        if self.store.manifest(key) is not None:
            self.store.delete([key])

    # ---------------------------------------------------------------- reconciling

    def reconcile(self, ref: DeploymentRef) -> None:
        """Bring the Deployment's pods to what the store says, one pod at a time: start a
        new one (ready, published), then retire an old one, until none is left to do."""
        self.store.refresh()
        manifest = self.store.manifest(ref.key)
        wanted = {f"{p.name}.{p.namespace}": p for p in self.desired([manifest] if manifest
                                                                       else [])}  # fmt: skip
        current = [k for k, owner in self.owners.items() if owner == ref]
        new = [item for key, item in wanted.items() if key not in self.pods]
        old = [key for key in current if key not in wanted]
        while (new or old) and not self.stopping.is_set():
            if new:
                self.start(new.pop(0), ref)
            if old:
                self.retire(old.pop(0))

    def report_exits(self) -> None:
        """Say once that a container exited (no kubelet here restarts it)."""
        for key, running in self.pods.items():
            for process in running.pod.processes:
                if not process.running and (key, process.role) not in self._reported:
                    self._reported.add((key, process.role))
                    self.echo(f"pod {running.item.namespace}/{running.item.name}: container "
                              f"{process.role} exited with {process.popen.returncode} "
                              f"(not restarted; its log: {process.log})")  # fmt: skip

    def close(self) -> None:
        """Withdraw every pod from the store, then stop them all (no drain: shutting down)."""
        for key in list(self.pods):
            running = self.pods.pop(key)
            self.starter.stop(running)
            try:
                self._remove(running)
            except (
                MeshpilotError,
                OSError,
            ) as exc:  # stopping the pods matters more than the store
                self.echo(f"pod {key}: could not be withdrawn from the store: {exc}")
            self.echo(f"pod {running.item.namespace}/{running.item.name} stopped")
        self.owners.clear()
