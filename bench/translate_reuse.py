"""bench/translate.py --rds-reuse: route configs after one VirtualService changed (issue 5).

The synthetic mesh's sidecar; each round changes the weights of one VirtualService, builds
the next PushContext from the previous one as the discovery server does (unchanged objects
kept by identity, `changed` naming the one key), and times one sidecar's route config of the
changed port (`8080`) twice, alternately: with the parts its proxy class kept from the
previous push, and with them dropped (every virtual host translated again, as before).
"""

from __future__ import annotations

import os
import statistics
import time

from bench.synthetic_mesh import MeshShape, synthetic_mesh_yaml
from meshpilot.config.loader import load_text
from meshpilot.model.lasting_memo import LastingMemo
from meshpilot.model.proxy import ProxyType, proxy_from_pod
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.xds.generate.routes import generate_sidecar_routes

__all__ = ["rds_reuse"]

_ROUTE = "8080"
_PROXY = ("svc-0-v1-5f6d7c8b9-p0000", "ns-0")


def _timed_routes(push: PushContext) -> tuple[float, bytes]:
    pod = push.pod(_PROXY[1], _PROXY[0])
    assert pod is not None
    proxy = proxy_from_pod(pod, ProxyType.SIDECAR)
    start = time.process_time()
    (config,) = generate_sidecar_routes(push, proxy, [_ROUTE])
    return time.process_time() - start, config.SerializeToString()


def rds_reuse(services: int, rounds: int) -> str:
    shape = MeshShape(services=services, virtual_services=services)
    loaded = load_text(synthetic_mesh_yaml(shape), "synthetic.yaml")
    objects = {o.key: o for o in loaded.objects}
    push = build_push_context(list(objects.values()), loaded.mesh)
    _timed_routes(push)
    kept, dropped = [], []
    target = next(k for k in objects if k.kind == "VirtualService" and k.name == "svc-7")
    for n in range(max(rounds, 3) * 2):
        text = synthetic_mesh_yaml(MeshShape(services=8, virtual_services=8))
        text = text.replace("weight: 80", f"weight: {79 - n % 50}")
        text = text.replace("weight: 20", f"weight: {21 + n % 50}")
        changed_obj = next(o for o in load_text(text).objects if o.key == target)
        objects[target] = changed_obj
        push = build_push_context(
            list(objects.values()), loaded.mesh, n + 2, None, push, {target}, objects
        )
        fresh = build_push_context(
            list(objects.values()), loaded.mesh, n + 2, None, push, {target}, objects
        )
        object.__setattr__(fresh, "lasting", LastingMemo())  # nothing kept: as before
        if n % 2:  # alternate, so that the load of a shared machine hits both alike
            t_cold, expected = _timed_routes(fresh)
            t_kept, got = _timed_routes(push)
        else:
            t_kept, got = _timed_routes(push)
            t_cold, expected = _timed_routes(fresh)
        assert got == expected, "kept parts must give the bytes of a fresh build"
        kept.append(t_kept)
        dropped.append(t_cold)
    med = statistics.median
    return (
        f"route config {_ROUTE!r} ({services} services) after one VirtualService change, "
        f"CPU ms, median of {len(kept)}: with kept parts {med(kept) * 1e3:.2f}, "
        f"without {med(dropped) * 1e3:.2f} ({med(dropped) / med(kept):.1f}x); "
        f"load average {os.getloadavg()[0]:.2f}"
    )
