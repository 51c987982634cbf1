"""The monitoring port: routes, status codes and the shapes istioctl-trained eyes expect."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from meshpilot.discovery import Discovery
from meshpilot.settings import Ports, Settings

REPO = Path(__file__).resolve().parents[3]


async def _get(port: int, target: str) -> tuple[int, str, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = await reader.read()
    writer.close()
    head, _, body = data.decode().partition("\r\n\r\n")
    status = int(head.split()[1])
    content_type = next(
        line.split(": ", 1)[1] for line in head.splitlines() if line.startswith("Content-Type")
    )
    return status, content_type, body


def test_debug_pages() -> None:
    async def scenario() -> None:
        settings = Settings(ports=Ports(xds_plaintext=0, monitoring=0))
        discovery = Discovery([REPO / "examples" / "bookinfo"], settings)
        await discovery.start()
        port = discovery.monitoring_port
        try:
            assert (await _get(port, "/ready"))[:2] == (200, "text/plain; charset=utf-8")
            status, kind, body = await _get(port, "/debug/registryz")
            hosts = {s["hostname"] for s in json.loads(body)}
            assert status == 200 and kind == "application/json"
            assert "reviews.default.svc.cluster.local" in hosts
            status, _, body = await _get(port, "/debug/configz")
            configz = json.loads(body)
            assert configz["push_version"].endswith("/1") and configz["error"] is None
            assert {"VirtualService", "Pod", "Service"} <= {o["kind"] for o in configz["objects"]}
            ref = "istio-ingressgateway-5d8f7b9c4-x2x7p.istio-system"
            status, _, body = await _get(port, f"/debug/config_dump?proxyID={ref}&type=router")
            dump = json.loads(body)
            assert status == 200
            types = [c["@type"].rsplit(".", 1)[1] for c in dump["configs"]]
            assert types == [
                "ClustersConfigDump",
                "ListenersConfigDump",
                "RoutesConfigDump",
                "EndpointsConfigDump",
                "SecretsConfigDump",
            ]
            secrets = dump["configs"][4]["dynamic_active_secrets"]
            assert secrets and all(
                s["secret"]["tls_certificate"]["private_key"]["inline_string"] == "[redacted]"
                for s in secrets
                if "tls_certificate" in s["secret"]
            )
            assert (await _get(port, "/debug/config_dump"))[0] == 400
            assert (await _get(port, "/debug/config_dump?proxyID=nope.default"))[0] == 404
            assert (await _get(port, "/debug/syncz"))[2].strip() == "[]"
            status, kind, body = await _get(port, "/metrics")
            assert status == 200 and kind.startswith("text/plain; version=0.0.4")
            assert 'pilot_push_triggers{type="global"} 1' in body
            assert (await _get(port, "/nope"))[0] == 404
        finally:
            await discovery.stop(0)

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_configz_never_shows_secret_values() -> None:
    """The bookinfo credential's key and certificate stay out of the debug page."""
    secret_file = (REPO / "examples" / "bookinfo" / "tls.yaml").read_text()
    values = [line.split(": ", 1)[1] for line in secret_file.splitlines() if "tls." in line]

    async def scenario() -> str:
        settings = Settings(ports=Ports(xds_plaintext=0, monitoring=0))
        discovery = Discovery([REPO / "examples" / "bookinfo"], settings)
        await discovery.start()
        try:
            return (await _get(discovery.monitoring_port, "/debug/configz"))[2]
        finally:
            await discovery.stop()

    body = asyncio.run(scenario())
    assert values and not any(v in body for v in values)
    secrets = [o for o in json.loads(body)["objects"] if o["kind"] == "Secret"]
    credential = next(o for o in secrets if o["name"] == "bookinfo-credential")
    assert credential["object"]["data"] == {"tls.crt": "[redacted]", "tls.key": "[redacted]"}
