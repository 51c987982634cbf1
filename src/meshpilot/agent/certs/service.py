"""The agent's workload identity service: CA client, rotation and the SDS server, together.

`WorkloadSecrets` starts the SDS server on Envoy's `sds-grpc` socket before Envoy starts, then
fetches and renews the certificate in the background; SDS answers Envoy as soon as the first
certificate arrives. The mesh root is also copied into Envoy's working directory
(`./var/run/secrets/istio/root-cert.pem`, Istio's path) for the bootstrap's xds-grpc TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from meshpilot.agent.ca_client import CA_SERVER_NAME, CaClient, CaSettings
from meshpilot.agent.certs.rotation import CertificateRotator, RotationPolicy
from meshpilot.agent.certs.store import SecretStore
from meshpilot.agent.certs.workload import load_roots, spiffe_id
from meshpilot.agent.local_ca import local_token_source
from meshpilot.agent.options import ROOT_CERT_PATH, AgentOptions, sds_socket_path
from meshpilot.agent.sds import SdsServer
from meshpilot.errors import MeshpilotError
from meshpilot.supervise import TaskSupervisor

__all__ = ["CertOptions", "WorkloadSecrets"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class CertOptions:
    """Where the agent gets workload certificates (Istio's CA_ADDR, SECRET_TTL, ...)."""

    ca_address: str
    root_cert: Path
    token_file: Path | None = None
    # A control plane on this machine: tokens are signed with its CA dir's token key as
    # needed (in place of --token-file; agent/local_ca.py)
    local_ca_dir: Path | None = None
    ca_server_name: str = CA_SERVER_NAME
    policy: RotationPolicy = field(default_factory=RotationPolicy)


class WorkloadSecrets:
    def __init__(
        self,
        options: AgentOptions,
        certs: CertOptions,
        work_dir: Path,
        owner: tuple[int, int] | None = None,
    ) -> None:
        self.identity = spiffe_id(options.trust_domain, options.namespace, options.service_account)
        self.store = SecretStore()
        self.client = CaClient(
            CaSettings(
                address=certs.ca_address,
                root_cert=certs.root_cert,
                token_file=certs.token_file,
                token_source=local_token_source(certs.local_ca_dir, options)
                if certs.local_ca_dir is not None
                else None,
                server_name=certs.ca_server_name,
                cluster_id=options.cluster_id,
            )
        )
        self.rotator = CertificateRotator(
            self.client, self.identity, self.store, certs.policy, ca_name=certs.ca_address
        )
        self.sds = SdsServer(self.store, sds_socket_path(work_dir), owner)
        self.work_dir = work_dir
        self.owner = owner
        self._task: asyncio.Task[None] | None = None

    async def start(self, tasks: TaskSupervisor | None = None) -> None:
        """Serve SDS and start fetching; under `tasks` (the agent's) a rotation that fails
        on something unexpected is restarted and reported instead of ending for good."""
        roots = self.client.roots()
        load_roots(roots, str(self.client.settings.root_cert))
        self._publish_root(roots)
        await self.sds.start()
        if tasks is not None:
            self._task = tasks.start("certificates", self.rotator.run)
        else:
            self._task = asyncio.create_task(self.rotator.run(), name="certificates")
        log.info("workload identity %s from CA %s", self.identity, self.client.settings.address)

    def _publish_root(self, roots: bytes) -> None:
        """The public mesh root where the bootstrap's xds-grpc TLS context reads it."""
        path = self.work_dir / ROOT_CERT_PATH
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(roots)
        path.chmod(0o644)
        if self.owner is not None:
            os.chown(path, *self.owner)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, MeshpilotError):
                await self._task
        await self.sds.stop()
