"""The agent's certificate rotation under its task supervisor: an unexpected failure (here a
token file that is not text) is reported on /healthz/ready (503 naming the task),
/debug/tasks and /metrics of the status port, and the rotation is restarted; once the file
is fixed the workload certificate is issued and the task counts as healthy again."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

from meshpilot.agent.admin import EnvoyAdmin
from meshpilot.agent.certs.service import CertOptions, WorkloadSecrets
from meshpilot.agent.health import ReadinessProbe, StatusServer
from meshpilot.agent.options import AgentOptions
from meshpilot.model.proxy import ProxyType
from meshpilot.runtime.ports import free_port
from meshpilot.supervise import TaskSupervisor
from tests.unit.agent.ca_server import LocalCa
from tests.unit.tasks.probes import get as _get

IDENTITY = "spiffe://cluster.local/ns/default/sa/sleep"
TOKEN = "bootstrap-token-of-sleep"


def test_a_failed_rotation_is_reported_and_restarted(tmp_path: Path) -> None:
    options = AgentOptions(
        proxy_type=ProxyType.SIDECAR, pod_name="sleep-1", namespace="default",
        service_account="sleep",
    )  # fmt: skip
    token = tmp_path / "token"
    token.write_bytes(b"\xff\xfe not a token")  # read_text raises UnicodeDecodeError

    async def scenario() -> None:
        ca = LocalCa.create()
        ca.tokens[TOKEN] = IDENTITY
        await ca.start()
        certs = CertOptions(
            ca_address=ca.address, root_cert=ca.write_root(tmp_path / "root.pem"),
            token_file=token,
        )  # fmt: skip
        tasks = TaskSupervisor("agent", backoff_initial=0.5, healthy_after=0.3)
        work = Path(tempfile.mkdtemp(prefix="mp-"))  # the SDS socket path must stay short
        secrets = WorkloadSecrets(options, certs, work)
        status = StatusServer(ReadinessProbe(EnvoyAdmin(free_port()), tasks), 0, "127.0.0.1")
        await status.start()
        try:
            await secrets.start(tasks)
            await asyncio.sleep(0.2)
            code, body = await asyncio.to_thread(_get, status.port, "/healthz/ready")
            assert (code, body) == (
                503,
                "task certificates restarting: UnicodeDecodeError: 'utf-8' codec can't decode "
                "byte 0xff in position 0: invalid start byte\n",
            )
            shown = json.loads((await asyncio.to_thread(_get, status.port, "/debug/tasks"))[1])
            assert shown["ready"] is False
            assert [(t["name"], t["state"], t["failures"]) for t in shown["tasks"]] == [
                ("certificates", "restarting", 1)
            ]
            metrics = (await asyncio.to_thread(_get, status.port, "/metrics"))[1]
            assert 'meshpilot_task_failures_total{task="certificates"} 1\n' in metrics

            token.write_text(TOKEN)  # fixed: the restarted rotation gets the certificate
            for _ in range(300):
                if secrets.store.cert is not None and tasks.ready:
                    break
                await asyncio.sleep(0.02)
            assert secrets.store.cert is not None and secrets.store.cert.identity == IDENTITY
            assert tasks.ready
            metrics = (await asyncio.to_thread(_get, status.port, "/metrics"))[1]
            assert 'meshpilot_task_up{task="certificates"} 1\n' in metrics
            code, body = await asyncio.to_thread(_get, status.port, "/healthz/ready")
            assert code == 503 and "task" not in body  # now only Envoy (not run here) is missing
        finally:
            await secrets.stop()
            await status.close()
            await ca.stop()
            shutil.rmtree(work, ignore_errors=True)

    asyncio.run(scenario())
