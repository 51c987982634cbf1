"""Real Envoys for bench/gitops.py: `meshpilot discovery --store DIR` plus N sidecars.

The sidecars (interceptionMode NONE, namespace ns0, a network namespace each, so root, so
that their port-80 listeners never clash; xDS over discovery's Unix socket) see every
app's Service and VirtualService, so a one-app commit changes their route "80". When an
Envoy applied a version is read from the control plane's /debug/syncz (`acked_at` of the
route type, stamped by discovery when the ACK arrives), not by polling Envoy; each Envoy's
admin is read once after the fact to check that the ACKed route carries the commit's weight.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.e2e.ads_harness import (
    EnvoyProcess,
    StoreDiscovery,
    can_use_netns,
    istio_metadata,
    wait_for,
)
from tests.e2e.workload_sds import WorkloadSds

ROUTE = "80"  # every bench Service listens on port 80


@dataclass
class Fleet:
    """Discovery over `store` and `count` sidecar Envoys; `stop()` ends all of them."""

    store: Path
    workdir: Path
    count: int
    debounce: str = "100ms"
    discovery: StoreDiscovery | None = None
    keep_logs: Path | None = None  # copy discovery's and the Envoys' logs here on stop
    sds: WorkloadSds | None = None  # the agent's certificates, so that Envoy's init finishes
    envoys: list[EnvoyProcess] = field(default_factory=list)

    def start(self) -> Fleet:
        if not can_use_netns():
            raise SystemExit("--envoys needs root, unshare and ip (a network namespace per Envoy)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        spiffe = "spiffe://cluster.local/ns/ns0/sa/default"
        self.sds = WorkloadSds(self.workdir / "sds.sock", spiffe).start()
        self.discovery = StoreDiscovery(
            [], self.workdir, self.debounce, store=self.store, log_level="info"
        )
        self.discovery.start()
        for k in range(self.count):
            node = f"sidecar~127.0.0.1~bench{k}.ns0~ns0.svc.cluster.local"
            meta = istio_metadata("ns0", {"app": f"bench{k}"}, interception="NONE")
            envoy = EnvoyProcess(f"bench{k}", node, meta, self.workdir, self.discovery)
            envoy.own_netns = True  # its port-80 listeners clash with no one
            self.envoys.append(envoy)
            envoy.start()
        for envoy in self.envoys:
            envoy.wait_live(timeout=60)
        return self

    def stop(self) -> None:
        for envoy in reversed(self.envoys):
            with contextlib.suppress(Exception):
                envoy.stop()
        if self.discovery is not None:
            self.discovery.stop()
        if self.sds is not None:
            self.sds.stop()
            self.sds = None
        if self.keep_logs is not None:
            self.keep_logs.mkdir(parents=True, exist_ok=True)
            for log in self.workdir.glob("*.log"):
                shutil.copy(log, self.keep_logs / log.name)

    def counts(self) -> dict[str, float]:
        """Discovery's counters so far: pushes started, route responses sent, and the store
        events it saw by kind (each restarts the debounce's quiet time)."""
        assert self.discovery is not None
        metrics = self.discovery.metrics()
        out = {
            "pushes": sum(v for k, v in metrics.items() if k.startswith("pilot_push_triggers")),
            "route_sends": metrics.get('pilot_xds_pushes{type="rds"}', 0.0),
        }
        for name, value in metrics.items():
            if name.startswith("pilot_k8s_cfg_events{"):
                kind = name.split('type="', 1)[1].split('"', 1)[0]
                out[f"events:{kind}"] = out.get(f"events:{kind}", 0.0) + value
        return out

    def routes(self) -> dict[str, dict[str, Any]]:
        """{proxy id: the route type's syncz entry} of every connected bench Envoy."""
        assert self.discovery is not None
        out = {}
        for entry in self.discovery.json("/debug/syncz"):
            route = entry["types"].get("rds")
            if route is not None:
                out[entry["proxy"]] = route
        return out

    def wait_synced(self, timeout: float = 60) -> dict[str, dict[str, Any]]:
        def ready() -> dict[str, dict[str, Any]] | None:
            routes = self.routes()
            ok = len(routes) == self.count and all(r["status"] == "SYNCED" for r in routes.values())
            return routes if ok else None

        return wait_for(ready, f"{self.count} Envoys ACKed their routes", timeout)

    def weights(self, envoy: EnvoyProcess, i: int) -> list[int]:
        """The weights of Envoy's route to svc{i} (one admin read)."""
        status, body = envoy.get("/config_dump?resource=dynamic_route_configs")
        if status != 200:
            return []
        host = f"svc{i}.ns{i}.svc.cluster.local"
        for config in json.loads(body).get("configs", []):
            route_config = config.get("route_config", {})
            if route_config.get("name") != ROUTE:
                continue
            for vhost in route_config.get("virtual_hosts", []):
                if host in vhost.get("domains", []):
                    route = vhost["routes"][0]["route"]
                    if "weighted_clusters" not in route:
                        return [100]
                    return [int(c["weight"]) for c in route["weighted_clusters"]["clusters"]]
        return []

    def wait_applied(
        self, before: dict[str, dict[str, Any]], i: int, weights: list[int], timeout: float = 30
    ) -> tuple[float, float]:
        """Wall-clock times (first sent, last ACKed) of the route with `weights` for svc{i},
        over all Envoys: syncz read every 50 ms for a new ACKed nonce, then one admin read per
        Envoy checks it (an unrelated push ACKed first is skipped, waiting for the next). The
        times are discovery's own stamps: reading less often changes none of them, only the
        work the reading adds to discovery while the push goes out."""
        seen = {p: r["nonce_acked"] for p, r in before.items()}
        done: dict[str, float] = {}
        sent: dict[str, float] = {}
        envoy_of = {e.node_id.split("~")[2]: e for e in self.envoys}
        deadline = time.monotonic() + timeout
        while len(done) < self.count:
            if time.monotonic() > deadline:
                raise AssertionError(f"Envoys did not ACK weights {weights} for svc{i}")
            for proxy, route in self.routes().items():
                if proxy in done or route["status"] != "SYNCED":
                    continue
                if route["nonce_acked"] == seen.get(proxy) or not route["acked_at"]:
                    continue
                seen[proxy] = route["nonce_acked"]
                if self.weights(envoy_of[proxy], i) == weights:
                    done[proxy] = datetime.fromisoformat(route["acked_at"]).timestamp()
                    sent[proxy] = datetime.fromisoformat(route["sent_at"]).timestamp()
            time.sleep(0.05)
        return min(sent.values()), max(done.values())
