"""`meshpilot explain` of one request on the B1 mesh (bench/synthetic_mesh.py: 1000 Services,
3000 pods, 1000 VirtualServices, 500 DestinationRules), offline. Target: <= 1 s.

    python bench/explain.py [--repeat 3]

Reports, each a median over --repeat runs:
  load+push: reading the YAML and building the PushContext (shared with translate)
  explain: the source's config, the walk, the destination's config and its inbound side
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.synthetic_mesh import MeshShape, synthetic_mesh_yaml
from meshpilot.config.loader import load_text
from meshpilot.explain import build_scene, explain, parse_request, workload_of
from meshpilot.model.push_context import build_push_context

SOURCE = ("svc-0-v1-5f6d7c8b9-p0000", "ns-0")
URL = "http://svc-10.ns-0:8080/api"
HEADERS = ("end-user: jason",)


def one_run(text: str) -> tuple[float, float, str]:
    start = time.perf_counter()
    loaded = load_text(text, "synthetic.yaml")
    push = build_push_context(loaded.served, loaded.mesh)
    pushed = time.perf_counter()
    pod = push.pod(SOURCE[1], SOURCE[0])
    assert pod is not None
    result = explain(workload_of(push, pod), parse_request(URL, "GET", HEADERS), build_scene(push))
    done = time.perf_counter()
    return pushed - start, done - pushed, result.outcome.cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    text = synthetic_mesh_yaml(MeshShape())
    runs = [one_run(text) for _ in range(args.repeat)]
    push_s = statistics.median(r[0] for r in runs)
    explain_s = statistics.median(r[1] for r in runs)
    print(f"B1 mesh, {URL} from {SOURCE[0]}.{SOURCE[1]} -> {runs[0][2]}")
    print(f"load+push  {push_s:.3f} s")
    print(f"explain    {explain_s:.3f} s  (target <= 1 s: {'ok' if explain_s <= 1 else 'MISSED'})")


if __name__ == "__main__":
    main()
