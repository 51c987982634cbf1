"""`Cluster`: pods on one machine, owned by one process and torn down when it is done.

    with Cluster(ClusterConfig(name="demo")) as cluster:
        web = cluster.add_pod(PodSpec(name="web", app=("python3", "-m", "http.server")))
        ...
    # every pod process stopped, every namespace, veth and the bridge deleted

Teardown also runs when the block raises and when the process gets SIGTERM (turned into
SystemExit while the cluster is open, in the main thread). After SIGKILL or a power cut,
the next `Cluster` started on the machine removes the leftovers (`runtime.leftovers`).
"""

from __future__ import annotations

import fcntl
import hashlib
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from meshpilot.errors import MeshpilotError
from meshpilot.runtime.commands import require_host_support
from meshpilot.runtime.leftovers import (
    LINK_PREFIX,
    NAME_PREFIX,
    WORKDIR_PREFIX,
    Owner,
    owner_path,
    remove_leftovers,
)
from meshpilot.runtime.netns import PodInterface
from meshpilot.runtime.network import (
    DEFAULT_SUBNETS,
    Bridge,
    IpPool,
    choose_subnet,
    create_bridge,
    delete_bridge,
    used_networks,
)
from meshpilot.runtime.pod import Pod, PodError, PodSpec

__all__ = ["Cluster", "ClusterConfig", "ClusterError"]

CLUSTER_NAME = re.compile(r"^[a-z0-9]{1,8}$")  # bridge mp-<name> fits IFNAMSIZ


class ClusterError(MeshpilotError):
    """The cluster name is taken by a running process, or teardown left something behind."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterConfig:
    name: str = "0"
    subnets: tuple[str, ...] = DEFAULT_SUBNETS  # candidates, first free one wins
    state_dir: Path = Path("/run/meshpilot")  # owner files and the lock; tmpfs, like netns
    workdir: Path | None = None  # pod logs; default a temporary directory, removed at close
    stop_grace: float = 2.0  # seconds between SIGTERM and SIGKILL
    handle_sigterm: bool = True

    def __post_init__(self) -> None:
        if not CLUSTER_NAME.match(self.name):
            raise ClusterError(f"cluster name {self.name!r}: 1-8 characters a-z, 0-9")


class Cluster:
    def __init__(self, config: ClusterConfig | None = None) -> None:
        self.config = config or ClusterConfig()
        self.bridge: Bridge | None = None
        self.pods: dict[str, Pod] = {}
        self._pool: IpPool | None = None
        self._workdir: Path | None = None
        self._owned = False
        self._previous_sigterm: Any = None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def bridge_name(self) -> str:
        return f"{NAME_PREFIX}{self.name}"

    def netns_name(self, spec: PodSpec) -> str:
        return f"{NAME_PREFIX}{self.name}-{spec.namespace}-{spec.name}"

    def host_link_name(self, spec: PodSpec) -> str:
        digest = hashlib.sha1(f"{self.name}/{spec.key}".encode()).hexdigest()
        return f"{LINK_PREFIX}{digest[:10]}"

    def __enter__(self) -> Cluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.close()
        except MeshpilotError as cleanup_error:
            if exc is None:
                raise
            exc.add_note(f"and teardown failed: {cleanup_error}")

    def start(self) -> None:
        """Claim the name, remove leftovers of dead runs, create the bridge."""
        require_host_support()
        self._install_sigterm_handler()
        try:
            self._workdir = self.config.workdir or Path(
                tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{self.name}-")
            )
            if self.config.workdir is None:
                self._workdir.chmod(0o711)  # sidecars running as 1337 reach their pod directory
            with self._locked():
                remove_leftovers(self.config.state_dir)
                self._claim()
                subnet = choose_subnet(self.config.subnets, used_networks())
                self.bridge = create_bridge(self.bridge_name, subnet)
            self._pool = IpPool(subnet)
        except BaseException:
            self.close()
            raise

    def add_pod(self, spec: PodSpec) -> Pod:
        """Create and start a pod (namespace, veth, capture rules, app)."""
        if self.bridge is None or self._pool is None or self._workdir is None:
            raise ClusterError(f"cluster {self.name} is not started")
        if spec.key in self.pods:
            raise PodError(f"pod {spec.key} already exists")
        address = self._pool.allocate(spec.address)
        wiring = PodInterface(
            host_link=self.host_link_name(spec),
            address=address,
            subnet=self.bridge.subnet,
            bridge=self.bridge.name,
            gateway=self.bridge.gateway,
        )
        pod = Pod(
            spec,
            netns=self.netns_name(spec),
            wiring=wiring,
            workdir=self._workdir / spec.key,
            grace=self.config.stop_grace,
        )
        self.pods[spec.key] = pod
        try:
            pod.start()
        except BaseException:
            del self.pods[spec.key]
            self._pool.release(address)
            raise
        return pod

    def remove_pod(self, key: str) -> None:
        pod = self.pods.pop(key)
        try:
            pod.stop()
        finally:
            if self._pool is not None:
                self._pool.release(pod.ip)

    def close(self) -> None:
        """Stop every pod, delete the bridge, give up the name. Safe to call twice."""
        signal_guard = self._ignore_sigterm()
        errors: list[str] = []
        for key in reversed(list(self.pods)):
            try:
                self.remove_pod(key)
            except MeshpilotError as exc:
                errors.append(str(exc))
        if self.bridge is not None or self._owned:
            try:
                delete_bridge(self.bridge_name)
            except MeshpilotError as exc:
                errors.append(str(exc))
            self.bridge = None
        if self._workdir is not None and self.config.workdir is None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        self._workdir = None
        if self._owned:
            owner_path(self.config.state_dir, self.name).unlink(missing_ok=True)
            self._owned = False
        signal_guard()
        if errors:
            raise ClusterError(f"cluster {self.name} teardown: " + "; ".join(errors))

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.config.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.config.state_dir / "lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _claim(self) -> None:
        path = owner_path(self.config.state_dir, self.name)
        owner = Owner.read(path)
        if owner is not None and owner.alive():
            raise ClusterError(f"cluster {self.name} is in use by process {owner.pid}")
        temporary = self._workdir if self.config.workdir is None else None
        Owner.current(temporary).write(path)
        self._owned = True

    def _install_sigterm_handler(self) -> None:
        if (
            not self.config.handle_sigterm
            or threading.current_thread() is not threading.main_thread()
        ):
            return

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            raise SystemExit(128 + signum)

        self._previous_sigterm = signal.signal(signal.SIGTERM, on_sigterm)

    def _ignore_sigterm(self) -> Any:
        """During teardown a SIGTERM is held back; returns the function that restores the
        handler from before the cluster started and then delivers a held-back SIGTERM."""
        if self._previous_sigterm is None:
            return lambda: None
        held: list[int] = []
        signal.signal(signal.SIGTERM, lambda signum, frame: held.append(signum))
        previous, self._previous_sigterm = self._previous_sigterm, None

        def restore() -> None:
            signal.signal(signal.SIGTERM, previous)
            if held:
                signal.raise_signal(signal.SIGTERM)

        return restore
