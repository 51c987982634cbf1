"""Watch-to-ACK over two discovery replicas sharing one live store: etcd against the
directory store (B3's endpoint change, issue 24).

    python bench/replicas.py [--clients 1000] [--changes 5] [--backends directory etcd]
                             [--json out.json]

For each backend: a store holding the synthetic mesh (bench/synthetic_mesh.py, written
through the store's own `apply`, as `meshpilot apply` does), two `meshpilot discovery
--store URL` processes, and N simulated ADS clients (bench/push.py's, SotW, every response
ACKed) split over them, half each, in two client processes. Each change: the endpoint
change of B3 (a Pod with a new IP) written by `apply` on a store handle in this process;
the latency of a client is that write -> its last ACK of the resulting push, p50/p90/p99/max
over all N clients of both replicas. etcd: one real member on loopback (Debian etcd-server).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.push import DEBOUNCE_S, Discovery, WorkerProcess, bench_pod, latency_stats, write_mesh
from meshpilot.config.yaml_source import read_text
from meshpilot.store.open import open_store

_CHUNK = 100  # objects per apply (etcd's --max-txn-ops)
_CLI = "import sys; from meshpilot.cli.main import main; sys.argv[0] = 'meshpilot'; main()"


class StoreDiscovery(Discovery):
    """`meshpilot discovery --store URL` (push.py's runs `-f DIR`)."""

    def __init__(self, url: str, log: Path) -> None:
        import signal  # noqa: F401  (Discovery.stop)
        import subprocess

        from meshpilot.runtime.ports import free_port

        self.monitoring, self.xds = free_port(), free_port()
        args = [sys.executable, "-c", _CLI, "discovery", "--store", url,
                "--no-ca", "--xds-port", str(self.xds), "--monitoring-port",
                str(self.monitoring), "--debounce", f"{DEBOUNCE_S * 1000:.0f}ms",
                "--log-level", "info"]  # fmt: skip
        with log.open("wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        self.log = log


def fill(url: str, mesh_dir: Path) -> Any:
    store = open_store(url, create=True)
    docs = []
    for path in sorted(mesh_dir.glob("*.yaml")):
        docs += read_text(path.read_text(), str(path)).documents
    for i in range(0, len(docs), _CHUNK):
        store.apply(docs[i : i + _CHUNK])
    return store


async def run_backend(name: str, url: str, n: int, changes: int, work: Path) -> dict[str, Any]:
    mesh_dir = work / f"mesh-{name}"
    mesh_dir.mkdir()
    write_mesh(mesh_dir)
    store = fill(url, mesh_dir)
    replicas = [StoreDiscovery(url, work / f"discovery-{name}-{i}.log") for i in range(2)]
    workers: list[WorkerProcess] = []
    result: dict[str, Any] = {"backend": name, "clients": n, "replicas": 2}
    try:
        deadline = time.monotonic() + 180
        while not all(r.ready() for r in replicas):
            if time.monotonic() > deadline:
                raise RuntimeError("discovery not ready after 180 s")
            await asyncio.sleep(0.2)
        half = n // 2
        for i, replica in enumerate(replicas):
            worker = await WorkerProcess.start(work / f"clients-{name}-{i}.log")
            workers.append(worker)
            target = f"127.0.0.1:{replica.xds}"
            sync = await worker.call("connect", target=target, n=half, bare=False, offset=i * half)
            if sync["synced"] != half:
                raise RuntimeError(f"{name}: only {sync['synced']}/{half} synced")
        await asyncio.sleep(2.0)
        runs = []
        for k in range(changes):
            for worker in workers:
                await worker.call("mark")
            doc = read_text(bench_pod(k), "pod-bench.yaml").documents
            t0 = time.monotonic()
            await asyncio.to_thread(store.apply, doc)
            got = await asyncio.gather(
                *(w.call("collect", quiet=1.5, timeout=120, everyone=True) for w in workers)
            )
            merged = {**got[0]["clients"], **got[1]["clients"]}
            stats = latency_stats(merged, t0)
            runs.append({q: stats.get(q) for q in ("clients_reached", "p50_s", "p90_s", "p99_s",
                                                     "max_s")})  # fmt: skip
            await asyncio.sleep(2.0)
        result["runs"] = runs
        for q in ("p50_s", "p90_s", "p99_s", "max_s"):
            result[q] = statistics.median(r[q] for r in runs if r[q] is not None)
    finally:
        for worker in workers:
            await worker.stop()
        for replica in replicas:
            replica.stop()
    return result


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    with tempfile.TemporaryDirectory(prefix="replicas-") as tmp:
        work = Path(tmp)
        for backend in args.backends:
            if backend == "directory":
                out.append(await run_backend(backend, str(work / "store"), args.clients,
                                             args.changes, work))  # fmt: skip
                continue
            from tests.etcd_server import EtcdServer

            etcd = EtcdServer(work / "etcd-data").start()
            try:
                out.append(await run_backend(backend, etcd.url("/bench"), args.clients,
                                             args.changes, work))  # fmt: skip
            finally:
                etcd.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=5)
    parser.add_argument("--backends", nargs="+", default=["directory", "etcd"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    print("| store | replicas | clients | p50 | p90 | p99 | max |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        cells = " | ".join(f"{r[q] * 1e3:.0f} ms" for q in ("p50_s", "p90_s", "p99_s", "max_s"))
        print(f"| {r['backend']} | {r['replicas']} | {r['clients']} | {cells} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
