"""Status server and readiness probe without Envoy (unreachable admin), Envoy stats parsing,
drain paths. The probe against a real Envoy is in tests/e2e/test_agent.py."""

from __future__ import annotations

import asyncio

from meshpilot.agent.admin import EnvoyAdmin, parse_stats
from meshpilot.agent.drain import drain_envoy, drain_path
from meshpilot.agent.health import ReadinessProbe, StatusServer
from meshpilot.runtime.ports import free_port


async def _get(port: int, path: str, method: str = "GET") -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = await reader.read()
    writer.close()
    head, _, body = data.decode().partition("\r\n\r\n")
    return int(head.split()[1]), body


def test_parse_stats() -> None:
    text = (
        "cluster_manager.cds.update_success: 2\nserver.state: 0\n"
        "listener_manager.workers_started: 1\nhistogram: P0(nan,0)\n"
    )
    assert parse_stats(text) == {
        "cluster_manager.cds.update_success": 2,
        "server.state": 0,
        "listener_manager.workers_started": 1,
    }


def test_drain_paths() -> None:
    assert drain_path(inbound_only=True) == "/drain_listeners?inboundonly&graceful"
    assert drain_path(inbound_only=False) == "/drain_listeners?graceful"


def test_status_server_answers_503_without_envoy_and_404_elsewhere() -> None:
    async def scenario() -> None:
        probe = ReadinessProbe(EnvoyAdmin(free_port(), timeout=0.5))
        server = StatusServer(probe, 0, "127.0.0.1")
        await server.start()
        try:
            status, body = await _get(server.port, "/healthz/ready")
            assert status == 503 and "unreachable" in body
            assert (await _get(server.port, "/other"))[0] == 404
            assert (await _get(server.port, "/healthz/ready", "POST"))[0] == 405
            probe.set_draining()
            status, body = await _get(server.port, "/healthz/ready")
            assert status == 503 and "DRAINING" in body
        finally:
            await server.close()

    asyncio.run(scenario())


def test_drain_without_envoy_returns_at_once() -> None:
    async def scenario() -> bool:
        admin = EnvoyAdmin(free_port(), timeout=0.5)
        return await asyncio.wait_for(drain_envoy(admin, inbound_only=True, duration=30), 5)

    assert asyncio.run(scenario()) is False
