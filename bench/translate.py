"""B1: per-proxy config generation vs bare protobuf serialization, in one run.

    python bench/translate.py [--repeat 5] [--clock wall|cpu] [--json bench/results/translate.json]

Synthetic mesh (bench/synthetic_mesh.py): 1000 Services x 2 ports, 1000 VirtualServices,
500 DestinationRules with 2 subsets, 3000 pods. Reports, each a median over --repeat runs:
  cold: one sidecar's full config (CDS, EDS, LDS, RDS) from a fresh PushContext
  warm: a second sidecar in the same namespace, same push (shared parts from the cache)
  baseline: SerializeToString of exactly the resources each produced
  per type: the same runs split by generator (timed around each GENERATORS entry) and
  each next to the serialization of its own resources
  CDS cold per cluster (next to Istio's ~17.6 us/cluster), peak RSS, garbage collection
  inside each cold run and the load average (the machine may be shared).
Targets (PERFORMANCE.md B1): cold <= 10x serialization, warm <= 1.5x.

`--probe push|cold --services N` runs one cold generation for an instruction count under
valgrind (see probe()): a measure the load of a shared machine does not move.

`--rds-reuse --services N` (issue 5, B8): after a change of one VirtualService, CPU time of
one sidecar's route configs of the changed port, built with what the proxy class kept from
the previous push (routes/lasting.py) and, alternately, without it (as before it existed).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.synthetic_mesh import MeshShape, synthetic_mesh_yaml
from bench.translate_reuse import rds_reuse
from meshpilot.config.loader import LoadResult, load_text
from meshpilot.heap import settle_long_lived_objects
from meshpilot.model.proxy import Proxy, ProxyType, proxy_from_pod
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.xds.generate import GENERATORS, Generator, generate_proxy_config, generator
from meshpilot.xds.output import ProxyConfig
from meshpilot.xds.protos import TypeUrl

PROXY_A = ("svc-0-v1-5f6d7c8b9-p0000", "ns-0")
PROXY_B = ("svc-10-v1-5f6d7c8b9-p0000", "ns-0")


# Wall time by default; `--clock cpu` counts only this process's CPU time, steadier on a
# machine shared with other work (generation is single-threaded).
_CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = _CLOCKS["wall"]

_SECTION_OF_TYPE = {
    TypeUrl.CLUSTER: "clusters",
    TypeUrl.ENDPOINT: "endpoints",
    TypeUrl.LISTENER: "listeners",
    TypeUrl.ROUTE: "routes",
    TypeUrl.SECRET: "secrets",
}


class _TypeTimes:
    """Seconds spent in each sidecar generator, by section, for the run under way: the
    GENERATORS entries are wrapped, so generate_proxy_config itself is what is timed."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        for type_url, section in _SECTION_OF_TYPE.items():
            fn = generator(type_url, ProxyType.SIDECAR)
            GENERATORS[(type_url, ProxyType.SIDECAR)] = self._wrap(section, fn)

    def _wrap(self, section: str, fn: Generator) -> Generator:
        def timed(*args: Any) -> list[Any]:
            start = _clock()
            try:
                return fn(*args)
            finally:
                self.seconds[section] = _clock() - start

        return timed

    def take(self) -> dict[str, float]:
        out, self.seconds = self.seconds, {}
        return out


def _serialize_by_section(config: ProxyConfig) -> dict[str, float]:
    out = {}
    for name in ProxyConfig.SECTIONS:
        resources = getattr(config, name)
        start = _clock()
        for r in resources:
            r.SerializeToString()
        out[name] = _clock() - start
    return out


def _per_type(runs: list[tuple[dict[str, float], dict[str, float]]]) -> dict[str, Any]:
    """Median ms of generation and of serialization per section, and their ratio."""
    out: dict[str, Any] = {}
    for name in ProxyConfig.SECTIONS:
        gen = statistics.median(g.get(name, 0.0) for g, _ in runs)
        ser = statistics.median(s[name] for _, s in runs)
        ratio = gen / ser if ser else None
        out[name] = {"ms": gen * 1e3, "serialize_ms": ser * 1e3, "ratio": ratio}
    return out


class _GcWatch:
    """Garbage-collection time and collections (by generation) while `active`: a full
    collection landing inside a timed generation shows up here, not as slower code."""

    def __init__(self) -> None:
        self.active = False
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if not self.active:
            return
        if phase == "start":
            self._start = _clock()
        else:
            self.seconds += _clock() - self._start
            self.collections[info["generation"]] += 1

    def take(self) -> tuple[float, list[int]]:
        out = (self.seconds, self.collections)
        self.seconds, self.collections = 0.0, [0, 0, 0]
        return out


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = _clock()
    result = fn()
    return _clock() - start, result


def _serialize_time(config: ProxyConfig) -> float:
    resources = [r for name in ProxyConfig.SECTIONS for r in getattr(config, name)]
    start = _clock()
    for r in resources:
        r.SerializeToString()
    return _clock() - start


def _count(config: ProxyConfig) -> dict[str, int]:
    return {name: len(getattr(config, name)) for name in ProxyConfig.SECTIONS}


def _proxy(push: PushContext, ref: tuple[str, str]) -> Proxy:
    pod = push.pod(ref[1], ref[0])
    assert pod is not None, ref
    return proxy_from_pod(pod, ProxyType.SIDECAR)


def _cds_per_cluster(loaded: LoadResult) -> float:
    """Seconds per cluster for one sidecar's CDS from a fresh push (Istio's metric)."""
    push = build_push_context(loaded.objects, loaded.mesh)
    proxy = _proxy(push, PROXY_A)
    t_cds, clusters = _timed(
        lambda: generator(TypeUrl.CLUSTER, ProxyType.SIDECAR)(push, proxy, None)
    )
    return t_cds / len(clusters)


def run(repeat: int) -> dict[str, Any]:
    loaded = load_text(synthetic_mesh_yaml(MeshShape()), "synthetic.yaml")
    assert not loaded.errors, loaded.errors[:3]
    cold, warm, ser_a, ser_b, cds = [], [], [], [], []
    cold_types, warm_types = [], []
    counts: dict[str, int] = {}
    times = _TypeTimes()
    gc_watch = _GcWatch()
    cold_gc: list[tuple[float, list[int]]] = []
    load_before = os.getloadavg()[0]
    for _ in range(repeat):
        push = build_push_context(loaded.objects, loaded.mesh)
        settle_long_lived_objects()  # as the control plane does after each push build
        proxy_a, proxy_b = _proxy(push, PROXY_A), _proxy(push, PROXY_B)
        times.take()
        gc_watch.active = True
        t_cold, config_a = _timed(lambda: generate_proxy_config(push, proxy_a))  # noqa: B023
        gc_watch.active = False
        cold_gc.append(gc_watch.take())
        cold_gen = times.take()
        t_warm, config_b = _timed(lambda: generate_proxy_config(push, proxy_b))  # noqa: B023
        warm_gen = times.take()
        cold.append(t_cold)
        warm.append(t_warm)
        ser_a.append(_serialize_time(config_a))
        ser_b.append(_serialize_time(config_b))
        cold_types.append((cold_gen, _serialize_by_section(config_a)))
        warm_types.append((warm_gen, _serialize_by_section(config_b)))
        counts = _count(config_a)
        cds.append(_cds_per_cluster(loaded))
    med = statistics.median
    return {
        "mesh": vars(MeshShape()),
        "resources_per_sidecar": counts,
        "cold_ms": med(cold) * 1e3,
        "warm_ms": med(warm) * 1e3,
        "serialize_cold_ms": med(ser_a) * 1e3,
        "serialize_warm_ms": med(ser_b) * 1e3,
        "cold_ratio": med(cold) / med(ser_a),
        "warm_ratio": med(warm) / med(ser_b),
        "cold_per_type": _per_type(cold_types),
        "warm_per_type": _per_type(warm_types),
        "cds_cold_us_per_cluster": med(cds) * 1e6,
        "cold_gc_ms": [round(t * 1e3, 1) for t, _ in cold_gc],
        "cold_gc_collections": [c for _, c in cold_gc],
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "istio_us_per_cluster": 17.6,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "repeat": repeat,
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
    }


def _type_rows(r: dict[str, Any]) -> list[str]:
    rows = [
        "",
        "| per type | cold | serialize | ratio | warm | serialize | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in ProxyConfig.SECTIONS:
        c, w = r["cold_per_type"][name], r["warm_per_type"][name]
        if not (c["ms"] or c["serialize_ms"]):
            continue
        rows.append(
            f"| {name} | {c['ms']:.1f} ms | {c['serialize_ms']:.1f} ms | {_x(c['ratio'])} | "
            f"{w['ms']:.1f} ms | {w['serialize_ms']:.1f} ms | {_x(w['ratio'])} |"
        )
    return rows


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def markdown(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            "| B1: one sidecar, 1000-service mesh | ours | SerializeToString | ratio | target |",
            "|---|---|---|---|---|",
            f"| cold, full config | {r['cold_ms']:.1f} ms | {r['serialize_cold_ms']:.1f} ms | "
            f"{r['cold_ratio']:.2f}x | <= 10x |",
            f"| warm, second sidecar same namespace | {r['warm_ms']:.1f} ms | "
            f"{r['serialize_warm_ms']:.1f} ms | {r['warm_ratio']:.2f}x | <= 1.5x |",
            f"| CDS cold per cluster | {r['cds_cold_us_per_cluster']:.1f} us | Istio (Go) "
            f"{r['istio_us_per_cluster']} us | | |",
            f"| peak RSS | {r['peak_rss_mb']:.0f} MB | | | |",
            "",
            f"garbage collection in each cold run: {r['cold_gc_ms']} ms, collections by "
            f"generation {r['cold_gc_collections']}; load average before/after "
            f"{r['load_average']}",
            "",
            "resources per sidecar: "
            + ", ".join(f"{k} {v}" for k, v in r["resources_per_sidecar"].items()),
            *_type_rows(r),
        ]
    )


def probe(stage: str, services: int) -> None:
    """One cold generation (or only what precedes it) for an instruction count:

        PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no \\
            .venv/bin/python bench/translate.py --probe cold --services 300

    minus the same with `--probe push` is the cold generation's instructions, a measure
    other work on a shared machine does not move. A small mesh is generated first, so
    one-time costs (imports, upb classes, caches) fall outside both."""
    small = MeshShape(services=20, virtual_services=20, destination_rules=10)
    warm = load_text(synthetic_mesh_yaml(small), "warm-up.yaml")
    warm_push = build_push_context(warm.objects, warm.mesh)
    generate_proxy_config(warm_push, _proxy(warm_push, PROXY_A))
    shape = MeshShape(services=services, virtual_services=services, destination_rules=services // 2)
    loaded = load_text(synthetic_mesh_yaml(shape), "synthetic.yaml")
    push = build_push_context(loaded.objects, loaded.mesh)
    settle_long_lived_objects()
    proxy = _proxy(push, PROXY_A)
    if stage == "cold":
        generate_proxy_config(push, proxy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--clock", choices=sorted(_CLOCKS), default="wall")
    parser.add_argument(
        "--probe", choices=("push", "cold"), help="one run for valgrind (see probe())"
    )
    parser.add_argument("--services", type=int, default=300, help="mesh size for --probe")
    parser.add_argument("--rds-reuse", action="store_true", help="B8 RDS after one VS change")
    args = parser.parse_args()
    if args.probe:
        probe(args.probe, args.services)
        return
    if args.rds_reuse:
        print(rds_reuse(args.services, args.repeat))
        return
    global _clock
    _clock = _CLOCKS[args.clock]
    result = run(args.repeat)
    result["clock"] = args.clock
    print(markdown(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
