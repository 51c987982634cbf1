"""The etcd store against bare etcd and against the directory store.

    python bench/store_etcd.py [--objects 1000] [--changes 50] [--json out.json]

Starts a real etcd (one member on loopback, --max-txn-ops raised to hold the wave) and reports:

- wave: `EtcdStore.apply` of N ConfigMaps as one write (validation by the loader, one read of
  the objects it replaces, one transaction with a compare per key), against bare etcd writes
  of the same values: one transaction of N puts, and N single puts. Target (issue 24): the
  store's wave <= 2x bare puts of the same objects.
- watch: from one object's `apply` in another thread to the ChangeEvent of a handle following
  the store (`watch()`), median and p95 over --changes edits, for etcd and for the directory
  store (inotify on its journal), both on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.etcd_server import EtcdServer

from meshpilot.config.yaml_source import RawDocument, read_text
from meshpilot.store.base import ChangeEvent, WatchedStore
from meshpilot.store.directory import DirectoryStore
from meshpilot.store.etcd import parse_etcd_url
from meshpilot.store.etcd.backend import EtcdStore
from meshpilot.store.etcd.client import EtcdClient
from meshpilot.store.etcd.codec import encode_value

CM = """\
apiVersion: v1
kind: ConfigMap
metadata: {{name: {name}, namespace: bench}}
data: {{value: "{value}", more: "{more}"}}
"""


def configmaps(count: int, value: str) -> list[RawDocument]:
    text = "---\n".join(
        CM.format(name=f"cm-{i}", value=value, more="x" * 200) for i in range(count)
    )
    return read_text(text, "wave.yaml").documents


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def wave(server: EtcdServer, count: int) -> dict[str, float]:
    store = EtcdStore(parse_etcd_url(server.url("/store")))
    client = EtcdClient(parse_etcd_url(server.url("/bare")))
    out: dict[str, float] = {}
    for round_, value in enumerate(("one", "two", "three")):
        docs = configmaps(count, value)
        took = timed(lambda d=docs: store.apply(d))  # type: ignore[misc]
        values = [(f"/bare/ConfigMap/bench/cm-{i}".encode(), encode_value(d.data))
                  for i, d in enumerate(docs)]  # fmt: skip
        one_txn = timed(lambda v=values: client.swap([], v))  # type: ignore[misc]
        singles = timed(lambda v=values: [client.swap([], [kv]) for kv in v])  # type: ignore[misc]
        if round_:  # the first round creates (and warms up); later ones replace
            out.setdefault("store_wave_s", took)
            out["store_wave_s"] = min(out["store_wave_s"], took)
            out["bare_txn_s"] = min(out.get("bare_txn_s", one_txn), one_txn)
            out["bare_single_puts_s"] = min(out.get("bare_single_puts_s", singles), singles)
    out["ratio_to_bare_txn"] = out["store_wave_s"] / out["bare_txn_s"]
    out["ratio_to_single_puts"] = out["store_wave_s"] / out["bare_single_puts_s"]
    return out


def watch_latency(writer: WatchedStore, watcher: WatchedStore, changes: int) -> dict[str, float]:
    async def scenario() -> list[float]:
        loop = asyncio.get_running_loop()
        seen: asyncio.Queue[float] = asyncio.Queue()

        def handler(event: ChangeEvent) -> None:
            seen.put_nowait(time.perf_counter())

        watcher.subscribe(handler)
        task = asyncio.create_task(watcher.watch())
        await asyncio.sleep(0.5)
        while not seen.empty():
            seen.get_nowait()
        out = []
        for i in range(changes):
            docs = configmaps(1, f"edit-{i}")
            start = time.perf_counter()
            await loop.run_in_executor(None, writer.apply, docs)
            out.append(await asyncio.wait_for(seen.get(), 10) - start)
            await asyncio.sleep(0.02)
        task.cancel()
        return out

    samples = sorted(asyncio.run(scenario()))
    return {
        "median_ms": statistics.median(samples) * 1000,
        "p95_ms": samples[int(len(samples) * 0.95) - 1] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {"objects": args.objects}
    with tempfile.TemporaryDirectory() as tmp:
        server = EtcdServer(Path(tmp) / "etcd", extra_args=("--max-txn-ops", "100000"))
        server.start()
        try:
            results["wave"] = wave(server, args.objects)
            url = parse_etcd_url(server.url("/watch"))
            results["watch_etcd"] = watch_latency(EtcdStore(url), EtcdStore(url), args.changes)
        finally:
            server.stop()
        root = Path(tmp) / "dir"
        DirectoryStore(root).apply(configmaps(1, "start"))
        results["watch_directory"] = watch_latency(
            DirectoryStore(root), DirectoryStore(root), args.changes
        )
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
