"""`meshpilot discovery` with its CA serves the webhook, with the injector config of its store
(ConfigMap istio-sidecar-injector in istio-system), and writes the MutatingWebhookConfiguration
whose caBundle is its root and whose url is where the webhook listens."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import yaml

from meshpilot.discovery import Discovery
from meshpilot.settings import Ports, Settings
from tests.unit.inject.webhook_client import post, review

CONFIG_MAP = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: istio-sidecar-injector, namespace: istio-system}
data:
  config: |
    policy: disabled
    alwaysInjectSelector:
    - matchLabels: {app: ratings}
  values: '{"global": {"proxy": {"holdApplicationUntilProxyStarts": true}}}'
"""


def pod(app: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": app, "namespace": "shop", "labels": {"app": app}},
        "spec": {"containers": [{"name": app, "image": f"{app}:1"}]},
    }


def test_discovery_webhook_reads_the_store_injector_and_writes_its_config(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "injector.yaml").write_text(CONFIG_MAP)
    out = tmp_path / "mwc.yaml"
    settings = Settings(
        ports=Ports(xds_plaintext=0, monitoring=0, xds_tls=0, xds_mtls=0, webhook=0),
        ca_dir=str(tmp_path / "ca"),
        secure_front=False,
        webhook_config_out=str(out),
    )

    async def scenario() -> None:
        discovery = Discovery([config], settings)
        await discovery.start()
        try:
            assert discovery.webhook is not None and discovery.secure is not None
            port, root = discovery.webhook.port, discovery.secure.ca.root_pem
            written = yaml.safe_load(out.read_text())
            client = written["webhooks"][0]["clientConfig"]
            assert base64.b64decode(client["caBundle"]) == root
            assert client["url"] == f"https://127.0.0.1:{port}/inject"
            # policy disabled: only the alwaysInjectSelector's pod gets a sidecar, proxy first
            for app, injected in (("ratings", True), ("reviews", False)):
                body = json.dumps(review(pod(app), namespace="shop")).encode()
                answer = await asyncio.to_thread(post, port, root, body)
                assert answer.status == 200
                assert ("patch" in answer.review["response"]) is injected, app
                if injected:
                    names = [c["name"] for c in answer.patched(pod(app))["spec"]["containers"]]
                    assert names == ["istio-proxy", "ratings"]
        finally:
            await discovery.stop(0)
        assert discovery.webhook.port  # stopped: a new connection is refused
        try:
            await asyncio.to_thread(post, port, root, b"{}")
        except ConnectionRefusedError:
            pass
        else:
            raise AssertionError("the webhook still answers after stop")

    asyncio.run(asyncio.wait_for(scenario(), 60))
