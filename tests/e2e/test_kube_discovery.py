"""`meshpilot discovery --store kube://...` serving a real Envoy: bookinfo applied to the
stand-in API server (tests/kube_apiserver.py) through the CLI reaches Envoy, a later
`meshpilot apply --store kube://...` from another process reroutes it through the watch,
and so does an edit after the server cut every watch stream, with nothing rejected."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.ads_harness import DiscoveryProcess, EnvoyProcess, istio_metadata, wait_for
from tests.e2e.workload_sds import WorkloadSds
from tests.kube_apiserver import KubeApiServer, kube_fixture  # noqa: F401

pytestmark = pytest.mark.envoy

REPO = Path(__file__).resolve().parents[2]
MESHPILOT = Path(sys.executable).parent / "meshpilot"
BOOKINFO = REPO / "examples" / "bookinfo"
NODE = "sidecar~10.10.0.10~productpage-v1-6b746f74dc-9stvs.default~default.svc.cluster.local"
HOST = "reviews.default.svc.cluster.local:9080"


@dataclass
class KubeDiscovery(DiscoveryProcess):
    """`meshpilot discovery --store kube://...`, also on the Unix socket for the Envoy in
    its own network namespace."""

    store_url: str = ""

    def start(self) -> KubeDiscovery:
        args = [str(MESHPILOT), "discovery", "--store", self.store_url, "--no-ca"]
        args += ["--xds-port", str(self.xds_port), "--monitoring-port", str(self.monitoring_port)]
        args += ["--xds-uds", self.uds, "--debounce", self.debounce, "--log-level", "info"]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        wait_for(self._ready, f"discovery ready (log: {self.log})", timeout=30)
        return self


def meshpilot(*args: str) -> str:
    done = subprocess.run([str(MESHPILOT), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def weights(envoy: EnvoyProcess) -> dict[str, int]:
    """{subset: weight} of the productpage Envoy's route to reviews (its own config_dump)."""
    for config in envoy.config_dump()["configs"]:
        for dynamic in config.get("dynamic_route_configs", []):
            for vhost in dynamic["route_config"].get("virtual_hosts", []):
                if vhost["name"] == HOST:
                    route = vhost["routes"][-1]["route"]
                    clusters = route.get("weighted_clusters", {}).get("clusters", [])
                    return {c["name"].split("|")[2]: int(c["weight"]) for c in clusters}
    return {}


@pytest.fixture
def served(
    kube: KubeApiServer, tmp_path: Path
) -> Iterator[tuple[str, KubeDiscovery, EnvoyProcess]]:
    url = f"kube://standin?kubeconfig={kube.kubeconfig}"
    meshpilot("apply", "-f", str(BOOKINFO / "app.yaml"), "-f", str(BOOKINFO / "routing.yaml"),
              "--store", url)  # fmt: skip
    sds = WorkloadSds(tmp_path / "sds.sock").start()
    discovery = KubeDiscovery([], tmp_path, debounce="50ms", store_url=url)
    metadata: dict[str, Any] = istio_metadata("default", {"app": "productpage", "version": "v1"})
    envoy = EnvoyProcess("productpage", NODE, metadata, tmp_path, discovery, own_netns=True)
    try:
        discovery.start()
        envoy.start().wait_live()
        yield url, discovery, envoy
        assert envoy.rejected_updates() == {}
        assert not any(discovery.rejects().values())
    finally:
        envoy.stop()
        status = discovery.stop()
        sds.stop()
    assert status == 0, discovery.log.read_text()[-3000:]


def test_discovery_on_kube_serves_envoy_a_change_applied_through_the_cli(
    served: tuple[str, KubeDiscovery, EnvoyProcess], kube: KubeApiServer, tmp_path: Path
) -> None:
    url, discovery, envoy = served
    wait_for(lambda: weights(envoy) == {"v1": 80, "v3": 20}, "bookinfo's split in Envoy")
    edited = (BOOKINFO / "routing.yaml").read_text().replace("weight: 80", "weight: 50")
    (tmp_path / "routing.yaml").write_text(edited.replace("weight: 20", "weight: 50"))
    out = meshpilot("apply", "-f", str(tmp_path / "routing.yaml"), "--store", url)
    assert "virtualservice.networking.istio.io/reviews configured" in out
    applied = time.monotonic()
    wait_for(lambda: weights(envoy) == {"v1": 50, "v3": 50}, "the edit in Envoy", timeout=5)
    assert time.monotonic() - applied < 5
    out = meshpilot("get", "vs", "reviews", "-o", "yaml", "--store", url)
    assert "weight: 50" in out
    # every watch stream cut (an API server restarted): resumed, and the next edit arrives
    kube.drop_watches()
    edited = (BOOKINFO / "routing.yaml").read_text().replace("weight: 80", "weight: 10")
    (tmp_path / "routing.yaml").write_text(edited.replace("weight: 20", "weight: 90"))
    meshpilot("apply", "-f", str(tmp_path / "routing.yaml"), "--store", url)
    wait_for(lambda: weights(envoy) == {"v1": 10, "v3": 90}, "the edit in Envoy", timeout=10)
    assert "resuming in" in discovery.log.read_text()
