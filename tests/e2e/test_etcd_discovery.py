"""`meshpilot discovery --store etcd://...` serving a real Envoy: bookinfo applied to a real
etcd through the CLI reaches Envoy, and a later `meshpilot apply --store etcd://...` from
another process reroutes it through etcd's watch, with nothing rejected."""

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
from tests.etcd_server import EtcdServer, etcd_fixture  # noqa: F401

pytestmark = pytest.mark.envoy

REPO = Path(__file__).resolve().parents[2]
MESHPILOT = Path(sys.executable).parent / "meshpilot"
BOOKINFO = REPO / "examples" / "bookinfo"
NODE = "sidecar~10.10.0.10~productpage-v1-6b746f74dc-9stvs.default~default.svc.cluster.local"
HOST = "reviews.default.svc.cluster.local:9080"


@dataclass
class EtcdDiscovery(DiscoveryProcess):
    """`meshpilot discovery --store etcd://...`, also on the Unix socket for the Envoy in
    its own network namespace."""

    store_url: str = ""

    def start(self) -> EtcdDiscovery:
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
def served(etcd: EtcdServer, tmp_path: Path) -> Iterator[tuple[str, EtcdDiscovery, EnvoyProcess]]:
    url = etcd.url("/meshpilot")
    meshpilot("apply", "-f", str(BOOKINFO / "app.yaml"), "-f", str(BOOKINFO / "routing.yaml"),
              "--store", url)  # fmt: skip
    sds = WorkloadSds(tmp_path / "sds.sock").start()
    discovery = EtcdDiscovery([], tmp_path, debounce="50ms", store_url=url)
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


def test_discovery_on_etcd_serves_envoy_a_change_applied_through_the_cli(
    served: tuple[str, EtcdDiscovery, EnvoyProcess], tmp_path: Path
) -> None:
    url, _, envoy = served
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


def test_envoy_keeps_its_config_while_etcd_is_down_and_gets_the_next_change(
    served: tuple[str, EtcdDiscovery, EnvoyProcess], etcd: EtcdServer, tmp_path: Path
) -> None:
    url, discovery, envoy = served
    wait_for(lambda: weights(envoy) == {"v1": 80, "v3": 20}, "bookinfo's split in Envoy")
    etcd.stop()
    time.sleep(1.0)  # the watch is lost and retried meanwhile
    assert weights(envoy) == {"v1": 80, "v3": 20}  # served from the last good config
    assert discovery.get("/ready")[0] == 200
    etcd.start()
    edited = (BOOKINFO / "routing.yaml").read_text().replace("weight: 80", "weight: 10")
    (tmp_path / "routing.yaml").write_text(edited.replace("weight: 20", "weight: 90"))
    meshpilot("apply", "-f", str(tmp_path / "routing.yaml"), "--store", url)
    wait_for(lambda: weights(envoy) == {"v1": 10, "v3": 90}, "the edit in Envoy", timeout=10)
    assert "reconnecting" in discovery.log.read_text()
