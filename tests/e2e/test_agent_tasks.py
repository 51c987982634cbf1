"""`meshpilot proxy sidecar` with the real Envoy and control plane: a failure of the agent's
certificate rotation that nothing expected (a token file that is not text) is not silent.
The status port says so (/healthz/ready 503 naming the task, /debug/tasks, /metrics), the
rotation is restarted with backoff, and once the file is fixed the sidecar becomes ready."""

from __future__ import annotations

import json

import pytest
from tests.e2e.agent_harness import AgentFactory, http_get, wait_for
from tests.e2e.test_agent import MeshCa, mesh_ca, start_agent, start_discovery

from meshpilot.runtime.ports import free_ports

pytestmark = pytest.mark.envoy

__all__ = ["mesh_ca", "start_agent", "start_discovery"]  # fixtures used here


def test_a_failed_rotation_is_reported_restarted_and_recovers(
    start_agent: AgentFactory, start_discovery: object, mesh_ca: MeshCa
) -> None:
    xds_port = free_ports(1)[0]
    start_discovery(xds_port)  # type: ignore[operator]
    token = mesh_ca.token_file.read_bytes()
    broken = mesh_ca.token_file.with_name("broken-token")
    broken.write_bytes(b"\xff" + token)  # read as text, it raises UnicodeDecodeError
    args = [a if a != str(mesh_ca.token_file) else str(broken) for a in mesh_ca.agent_args()]
    agent = start_agent(
        "sidecar", "--interception-mode", "NONE", "--label", "app=demo", *args,
        discovery_port=xds_port,
    )  # fmt: skip
    status = agent.ports.agent_status

    def failing() -> str | None:
        code, body = http_get(status, "/healthz/ready")
        return body if code == 503 and body.startswith("task certificates ") else None

    body = wait_for(failing, "the failed rotation on /healthz/ready")
    assert "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff" in body
    tasks = json.loads(http_get(status, "/debug/tasks")[1])
    (rotation,) = tasks["tasks"]
    assert tasks["ready"] is False and rotation["name"] == "certificates"
    assert rotation["failures"] >= 1 and rotation["last_error"].startswith("UnicodeDecodeError")
    metrics = http_get(status, "/metrics")[1]
    assert "# TYPE meshpilot_task_failures_total counter" in metrics
    assert 'meshpilot_task_failures_total{task="certificates"}' in metrics

    broken.write_bytes(token)  # fixed: the next restart gets the certificate
    wait_for(lambda: http_get(agent.ports.health, "/healthz/ready")[0] == 200, "ready", 40)
    assert http_get(status, "/healthz/ready")[0] == 200
    tasks = json.loads(http_get(status, "/debug/tasks")[1])
    assert tasks["ready"] is True and tasks["tasks"][0]["state"] == "running"
    assert "agent: task certificates failed (failure 1), restarting in 0.5s: " in (
        agent.log.read_text()
    )
