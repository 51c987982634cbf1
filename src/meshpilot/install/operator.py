"""`meshpilot operator`: every IstioOperator in the store made into a running control plane.

Shaped like the GitOps controller: desired state (the store's IstioOperators, each resolved
over its profile) against what runs; per revision one `meshpilot discovery --revision R
--store S` on its own ports (any free ones; the revision's control-plane record in the CA
dir says which), kept up by a TaskSupervisor (restarted with backoff when it dies). Each
pass also applies the revision's ConfigMaps (a changed IstioOperator is rolled out through
them: the control plane follows the store) and creates its webhook configuration if absent.
A deleted IstioOperator's control plane is stopped. Passes are idempotent.

Gateways: `GatewayHook` is called with each revision's gateway objects; `meshpilot run`
starts them (the operator itself runs no pods).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import json
import logging
import shutil
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.errors import MeshpilotError
from meshpilot.install.installation import plan_install
from meshpilot.install.load import OperatorFile, ResolvedOperator, resolve
from meshpilot.install.operator_record import revision_socket_dir, traversable_dir
from meshpilot.install.render.context import K8sObject
from meshpilot.store.base import WatchedStore
from meshpilot.supervise import TaskSupervisor

__all__ = ["DesiredRevision", "GatewayHook", "Operator", "desired_revisions", "pilot_args"]

log = logging.getLogger(__name__)

GatewayHook = Callable[[str, list[K8sObject]], None]
_PR_SET_PDEATHSIG = 1
_CONTROL_PLANE_KINDS = ("ConfigMap", "MutatingWebhookConfiguration")


class ControlPlaneExited(MeshpilotError):
    """A revision's discovery process ended (the supervisor restarts it)."""


@dataclass(frozen=True, slots=True)
class DesiredRevision:
    revision: str
    key: ConfigKey
    resolved: ResolvedOperator
    digest: str  # of the merged spec: a change is rolled out


def desired_revisions(store: WatchedStore) -> tuple[dict[str, DesiredRevision], list[str]]:
    """The revisions the store's IstioOperators ask for, and the problems of those that
    cannot be installed (named by object); the first IstioOperator of a revision wins."""
    out: dict[str, DesiredRevision] = {}
    problems: list[str] = []
    for key in sorted(store.snapshot().objects):
        if key.kind is not Kind.ISTIO_OPERATOR:
            continue
        manifest = store.manifest(key) or {}
        origin = f"IstioOperator {key.namespace}/{key.name}"
        try:
            resolved = resolve(
                [OperatorFile(origin, manifest.get("metadata") or {}, manifest.get("spec") or {})]
            )
        except MeshpilotError as exc:
            text = str(exc)
            problems.append(text if text.startswith(origin) else f"{origin}: {text}")
            continue
        revision = resolved.operator.revision
        if revision in out:
            problems.append(
                f"{origin}: revision {revision or 'default'!r} is installed by "
                f"IstioOperator {out[revision].key.namespace}/{out[revision].key.name}; ignored"
            )
            continue
        if resolved.operator.spec.components.pilot.enabled is False:
            continue  # e.g. the `empty` or `remote` profile: no control plane here
        digest = hashlib.sha256(
            json.dumps(resolved.spec_tree, sort_keys=True, default=str).encode()
        ).hexdigest()
        out[revision] = DesiredRevision(revision, key, resolved, digest)
    return out, problems


def _die_with_parent() -> None:
    # a killed operator must not leave its control planes running
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class _Running:
    desired: DesiredRevision
    tasks: TaskSupervisor
    processes: list[asyncio.subprocess.Process] = field(default_factory=list)


def pilot_args(resolved: ResolvedOperator) -> list[str]:
    """What istiod's Deployment gets as env from values.pilot (PILOT_TRACE_SAMPLING), as
    `meshpilot discovery` flags."""
    pilot = resolved.operator.spec.values.pilot
    if pilot is None or pilot.trace_sampling is None:
        return []
    return ["--trace-sampling", f"{pilot.trace_sampling:g}"]


class Operator:
    def __init__(
        self,
        store: WatchedStore,
        store_url: str,
        ca_dir: Path,
        *,
        interval: float = 0.5,
        backoff_initial: float = 0.5,
        extra_args: Sequence[str] = (),
        gateway_hook: GatewayHook | None = None,
    ) -> None:
        self.store = store
        self.store_url = store_url
        self.ca_dir = ca_dir
        self.interval = interval
        self.backoff_initial = backoff_initial
        self.extra_args = tuple(extra_args)
        self.gateway_hook = gateway_hook
        self.running: dict[str, _Running] = {}
        self._reported: set[str] = set()

    def argv(self, revision: str) -> list[str]:
        """The revision's control plane: ports chosen free, sockets for netns pods."""
        sockets = revision_socket_dir(self.ca_dir, revision)
        return [
            sys.executable, "-c", "from meshpilot.cli.main import main; main()",
            "discovery", "--store", self.store_url, "--revision", revision or "default",
            "--xds-port", "0", "--monitoring-port", "0", "--ca-dir", str(self.ca_dir),
            "--xds-uds", str(sockets / "xds.sock"), "--secure-uds", str(sockets / "secure.sock"),
            *self.extra_args,
        ]  # fmt: skip

    async def _serve(self, running: _Running) -> None:
        revision = running.desired.revision
        traversable_dir(revision_socket_dir(self.ca_dir, revision))
        argv = [*self.argv(revision), *pilot_args(running.desired.resolved)]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, preexec_fn=_die_with_parent
        )
        running.processes.append(proc)
        log.info("operator: revision %s: control plane started (pid %d)", revision, proc.pid)
        try:
            code = await proc.wait()
        except asyncio.CancelledError:
            await _stop(proc)
            raise
        finally:
            running.processes.remove(proc)
        raise ControlPlaneExited(f"revision {revision or 'default'}: discovery exited ({code})")

    def _apply_objects(self, desired: DesiredRevision) -> None:
        """The revision's objects (a changed one is rolled out: the control plane follows
        the store), but an existing webhook configuration is left as the control plane
        wrote it (caBundle, url)."""
        plan = plan_install(desired.resolved, {}, force=True)
        documents = []
        for doc in plan.documents[1:]:  # [0]: the IstioOperator itself
            meta = doc["metadata"]
            if doc["kind"] == "MutatingWebhookConfiguration":
                key = ConfigKey(Kind.MUTATING_WEBHOOK_CONFIGURATION, "", meta["name"])
                if self.store.get(key) is not None:
                    continue
            documents.append(doc)
        if documents:
            origin = f"<operator {desired.key.namespace}/{desired.key.name}>"
            self.store.apply([RawDocument(origin, 1, d, {}) for d in documents])
        if self.gateway_hook is not None:
            gateways = [d for d in plan.documents[1:] if d["kind"] not in _CONTROL_PLANE_KINDS]
            self.gateway_hook(desired.revision, gateways)

    async def reconcile(self) -> None:
        """One pass: start, update and stop control planes to match the store."""
        await asyncio.to_thread(self.store.refresh)
        desired, problems = await asyncio.to_thread(desired_revisions, self.store)
        for problem in problems:
            if problem not in self._reported:
                log.error("operator: %s", problem)
        self._reported = set(problems)
        for revision in sorted(set(self.running) - set(desired)):
            log.info("operator: revision %s: IstioOperator deleted, stopping", revision)
            await self._stop_revision(revision)
        for revision, want in sorted(desired.items()):
            running = self.running.get(revision)
            if running is not None and running.desired.digest == want.digest:
                continue
            try:
                await asyncio.to_thread(self._apply_objects, want)
            except MeshpilotError as exc:
                log.error("operator: revision %s: %s", revision or "default", exc)
                continue
            if running is not None:
                running.desired = want  # rolled out through the store; the process stays
                continue
            tasks = TaskSupervisor(f"operator {revision or 'default'}", self.backoff_initial)
            running = self.running[revision] = _Running(want, tasks)
            tasks.start("discovery", lambda r=running: self._serve(r))  # type: ignore[misc]

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                await self.reconcile()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval)
        finally:
            await self.stop()

    async def _stop_revision(self, revision: str) -> None:
        """Its control plane stopped, then its socket directory (outside the CA dir) gone."""
        await self.running.pop(revision).tasks.stop()
        sockets = revision_socket_dir(self.ca_dir, revision)
        shutil.rmtree(sockets, ignore_errors=True)
        with contextlib.suppress(OSError):
            sockets.parent.rmdir()  # the last revision's: the per-CA directory too

    async def stop(self) -> None:
        for revision in sorted(self.running):
            await self._stop_revision(revision)

    def status(self) -> list[dict[str, Any]]:
        return [
            {"revision": rev or "default", "tasks": r.tasks.status(),
             "pids": [p.pid for p in r.processes]}
            for rev, r in sorted(self.running.items())
        ]  # fmt: skip


async def _stop(proc: asyncio.subprocess.Process, grace: float = 10.0) -> None:
    if proc.returncode is not None:
        return
    proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        proc.kill()
        await proc.wait()
