"""`meshpilot run -f FILES`: the Pods and Deployments of the files as network-namespace pods,
injected with the store's injector config, kept running as the store's Deployments change.

The files' objects other than Pods are applied to the store first (so `meshpilot rollout
restart` and `get` see the Deployments); bare Pods are started as given. Then the store is
watched: a Deployment whose template or replicas change has its pods replaced or scaled,
one pod at a time (runtime/run/controller.py). Ctrl-C or SIGTERM stops every pod started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import click

from meshpilot.cli.live import open_store, store_option, user_errors
from meshpilot.config.diagnostics import Severity
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_documents
from meshpilot.config.yaml_source import RawDocument, read_paths
from meshpilot.errors import MeshpilotError
from meshpilot.runtime.cluster import Cluster, ClusterConfig
from meshpilot.runtime.run.access import MeshAccess
from meshpilot.runtime.run.controller import Controller, DeploymentRef
from meshpilot.runtime.run.runner import PodStarter
from meshpilot.security.ca_material import ROOT_CERT
from meshpilot.settings import default_ca_dir

__all__ = ["run"]


def _echo(line: str) -> None:
    click.echo(line)


@click.command()
@click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    metavar="PATH",
    help="YAML/JSON file or directory with Pods and Deployments (repeatable).",
)
@click.option(
    "--all",
    "all_deployments",
    is_flag=True,
    help="Also run every Deployment in the store (the gateways `install` and the "
    "operator write among them), as they come and go.",
)
@store_option
@click.option(
    "--secure-uds",
    "secure_socket",
    required=True,
    metavar="PATH",
    help="The control plane's TLS Unix socket (`meshpilot discovery --secure-uds`): "
    "pods' agents reach xDS and the CA there.",
)
@click.option(
    "--ca-dir",
    metavar="DIR",
    help="The control plane's CA dir (tokens are issued "
    "with its key; its root-cert.pem is the pods' mesh root)  "
    "[default: $MESHPILOT_CA_DIR or ~/.meshpilot/ca].",
)
@click.option(
    "--cluster",
    "cluster_name",
    default="run",
    show_default=True,
    help="Name of the pods' network (1-8 characters a-z, 0-9).",
)
@click.option(
    "--ready-timeout",
    type=click.FloatRange(1),
    default=60,
    show_default=True,
    help="Seconds a pod has to become ready.",
)
@click.option(
    "--drain",
    type=click.FloatRange(0),
    default=2.0,
    show_default=True,
    help="Seconds between withdrawing a pod from the store and stopping it.",
)
@user_errors
def run(
    filenames: tuple[str, ...],
    all_deployments: bool,
    store_dir: str | None,
    secure_socket: str,
    ca_dir: str | None,
    cluster_name: str,
    ready_timeout: float,
    drain: float,
) -> None:  # fmt: skip
    """Run the Pods and Deployments of FILES here, injected (kubelet's stand-in)."""
    if not filenames and not all_deployments:
        raise click.UsageError("give -f FILES, --all (every Deployment in the store), or both")
    read = read_paths(filenames)
    loaded = load_documents(read.documents)
    errors = [d for d in [*read.diagnostics, *loaded.diagnostics] if d.severity is Severity.ERROR]
    if errors:
        raise click.ClickException("nothing run:\n" + "\n".join(str(d) for d in errors))
    pods = [d.data for d in read.documents if _kind(d) == "Pod"]
    stored = [d for d in read.documents if _kind(d) not in ("Pod", "")]
    refs = list(dict.fromkeys(DeploymentRef(_namespace(d), str(d.data["metadata"]["name"]))
                  for d in stored if _kind(d) == "Deployment"))  # fmt: skip
    ca = Path(ca_dir or os.environ.get("MESHPILOT_CA_DIR") or default_ca_dir())
    access = MeshAccess(Path(secure_socket), ca / ROOT_CERT, ca)
    if not access.root_cert.is_file():
        raise click.ClickException(f"{access.root_cert}: no mesh root (is --ca-dir the "
                                   "control plane's?)")  # fmt: skip
    store = open_store(store_dir, create=True)
    for result in store.apply(stored):
        click.echo(result.message)
    with (
        _agents_dir() as agents,
        Cluster(ClusterConfig(name=cluster_name, stop_grace=3.0, handle_sigterm=False)) as cluster,
    ):
        controller = Controller(store, PodStarter(cluster, access, Path(agents), ready_timeout),
                                _echo, drain)  # fmt: skip
        previous = _stop_on_signals(controller.stopping)
        try:
            for item in controller.desired(pods):
                controller.start(item, None)
            _watch(controller, refs, all_deployments)
            click.echo("stopping the pods", err=True)
        finally:
            try:
                controller.close()
            finally:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)


def _stop_on_signals(stopping: threading.Event) -> dict[int, Any]:
    """Ctrl-C or SIGTERM: stop after the current step (a pod half started or half stopped
    is never left behind); a second one interrupts at once (then every pod is stopped)."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stopping.is_set():
            raise KeyboardInterrupt
        stopping.set()

    return {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}


@contextlib.contextmanager
def _agents_dir() -> Iterator[str]:
    """The agents' working directories: short paths (Unix sockets), reachable by every
    pod's proxy user (each agent's own directory is its business)."""
    with tempfile.TemporaryDirectory(prefix="mprun-") as path:
        os.chmod(path, 0o711)
        yield path


def _stored_deployments(controller: Controller) -> list[DeploymentRef]:
    """Every Deployment in the store, and those whose pods still run (a deleted one's go)."""
    stored = {DeploymentRef(o.key.namespace, o.name)
              for o in controller.store.snapshot().of_kind(Kind.DEPLOYMENT)}  # fmt: skip
    running = {owner for owner in controller.owners.values() if owner is not None}
    return sorted(stored | running)


def _watch(controller: Controller, refs: list[DeploymentRef], every: bool) -> None:
    version = -1
    while not controller.stopping.is_set():
        controller.store.refresh()
        current = controller.store.snapshot().version
        if current != version:
            version = current
            watched = sorted(set(refs) | set(_stored_deployments(controller))) if every else refs
            for ref in watched:
                try:
                    controller.reconcile(ref)
                except (MeshpilotError, OSError) as exc:  # the others go on
                    click.echo(f"Error: deployment {ref.namespace}/{ref.name}: {exc}", err=True)
            version = controller.store.snapshot().version  # our own Pod writes
        controller.report_exits()
        controller.stopping.wait(0.3)


def _kind(doc: RawDocument) -> str:
    return str(doc.data.get("kind") or "") if isinstance(doc.data, dict) else ""


def _namespace(doc: RawDocument) -> str:
    return str((doc.data.get("metadata") or {}).get("namespace") or "default")
