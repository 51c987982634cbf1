"""`meshpilot discovery` serves the webhook as a user runs it: --webhook-port, --revision
(the certificate names istiod-<rev>) and --webhook-config-out; --webhook-port -1 turns it off."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import yaml

from meshpilot.runtime.ports import free_port
from tests.unit.inject.webhook_client import post, review
from tests.unit.security.procs import MESHPILOT, wait_port

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"containers": [{"name": "web", "image": "web"}]},
}


def discovery(tmp: Path, *extra: str) -> subprocess.Popen[bytes]:
    (tmp / "config").mkdir(exist_ok=True)
    argv = [
        MESHPILOT, "discovery", "-f", str(tmp / "config"), "--xds-port", "0",
        "--monitoring-port", "0", "--ca-dir", str(tmp / "ca"), "--no-front-envoy", *extra,
    ]  # fmt: skip
    return subprocess.Popen(argv, stderr=subprocess.PIPE)


def stop(proc: subprocess.Popen[bytes]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err.decode()


def test_webhook_port_revision_and_config_out(tmp_path: Path) -> None:
    port, out = free_port(), tmp_path / "mwc.yaml"
    proc = discovery(
        tmp_path, "--webhook-port", str(port), "--revision", "canary",
        "--webhook-config-out", str(out),
    )  # fmt: skip
    try:
        wait_port(port, proc)
        deadline = time.monotonic() + 10
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        config = yaml.safe_load(out.read_text())
        assert config["metadata"]["name"] == "istio-sidecar-injector-canary"
        assert config["webhooks"][0]["clientConfig"]["url"] == f"https://127.0.0.1:{port}/inject"
        root = (tmp_path / "ca" / "root-cert.pem").read_bytes()
        body = json.dumps(review(POD, namespace="shop")).encode()
        answer = post(port, root, body, server_name="istiod-canary.istio-system.svc")
        assert answer.status == 200 and answer.review["response"]["patchType"] == "JSONPatch"
    finally:
        err = stop(proc)
    assert f"injection webhook on https://127.0.0.1:{port}/inject" in err


def test_webhook_off(tmp_path: Path) -> None:
    proc = discovery(tmp_path, "--webhook-port", "-1", "--secure-port", str(free_port()))
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "ca" / "root-cert.pem").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)
    finally:
        err = stop(proc)
    assert "injection webhook" not in err
