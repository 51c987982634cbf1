"""Scope relevance and cross-push route configs: a VirtualService or DestinationRule change
reaches only the proxies that can see a host it names, and route configs of ports its hosts
do not use are the previous push's, byte for byte what a cold build gives."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_paths
from meshpilot.config.objects import ConfigObject
from meshpilot.model.proxy import ProxyType
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.xds.cache import carry_over
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.push_request import PushRequest, push_plan
from meshpilot.xds.resources import generate_resources
from tests.conftest import proxy_for
from tests.unit.xds_server.test_push_scope import VS, _extra, _sync
from tests.unit.xds_server.test_server import Harness, run

MESH = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: a}
spec: {clusterIP: 10.96.0.20, selector: {app: web}, ports: [{name: http, port: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: b}
spec: {clusterIP: 10.96.0.21, selector: {app: api}, ports: [{name: http, port: 9090}]}
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: a, labels: {app: client}}
status: {podIP: 10.0.0.9}
---
apiVersion: v1
kind: Pod
metadata: {name: api-1, namespace: b, labels: {app: api}}
status: {podIP: 10.0.0.5}
---
apiVersion: v1
kind: Pod
metadata: {name: other, namespace: c, labels: {app: other}}
status: {podIP: 10.0.0.7}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress: [{hosts: ["./*"]}]
"""


def _vs(host: str, ns: str, timeout: str, export: str = "") -> str:
    export_to = f"\n  exportTo: [{export}]" if export else ""
    return f"""---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: {host}, namespace: {ns}}}
spec:
  hosts: [{host}]{export_to}
  http:
  - timeout: {timeout}
    route:
    - destination: {{host: {host}}}
"""


def _dr(host: str, ns: str, max_conns: int) -> str:
    return f"""---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: {host}, namespace: {ns}}}
spec:
  host: {host}
  trafficPolicy: {{connectionPool: {{tcp: {{maxConnections: {max_conns}}}}}}}
"""


def _push(
    tmp: Path, extra: str, prev: PushContext | None = None, counter: int = 1
) -> tuple[PushContext, set[ConfigKey]]:
    path = tmp / f"mesh-{counter}.yaml"
    path.write_text(MESH + extra)
    loaded = load_paths([path])
    assert not loaded.diagnostics
    objects: list[ConfigObject[Any]] = list(loaded.objects)
    changed: set[ConfigKey] = set()
    if prev is not None:
        after = {o.key: o for o in objects}
        changed = {k for k in prev.by_key.keys() ^ after.keys()}
        changed |= {
            k
            for k, o in after.items()
            if k in prev.by_key and prev.by_key[k].model != o.model  # re-read: compare models
        }
    push = build_push_context(objects, loaded.mesh, counter, None, prev, changed or None)
    return push, changed


WATCHED = [TypeUrl.CLUSTER, TypeUrl.ENDPOINT, TypeUrl.LISTENER, TypeUrl.ROUTE]


def _plan(prev: PushContext, push: PushContext, changed: set[ConfigKey], ref: str) -> list[str]:
    req = PushRequest(full=True, configs_updated=frozenset(changed), push=push)
    return [t for t, _ in push_plan(prev, req, proxy_for(push, ref), WATCHED, None)]


def test_virtual_service_reaches_only_proxies_that_see_its_host(tmp_path: Path) -> None:
    before, _ = _push(tmp_path, _vs("api", "b", "5s"))
    after, changed = _push(tmp_path, _vs("api", "b", "7s"), before, 2)
    assert changed == {ConfigKey(Kind.VIRTUAL_SERVICE, "b", "api")}
    assert _plan(before, after, changed, "client.a") == []  # its Sidecar sees namespace a only
    assert _plan(before, after, changed, "api-1.b") == [TypeUrl.ROUTE]
    assert _plan(before, after, changed, "other.c") == [TypeUrl.ROUTE]  # no Sidecar: all


def test_virtual_service_not_exported_to_the_namespace_is_skipped(tmp_path: Path) -> None:
    before, _ = _push(tmp_path, _vs("api", "b", "5s", export='"."'))
    after, changed = _push(tmp_path, _vs("api", "b", "7s", export='"."'), before, 2)
    assert _plan(before, after, changed, "other.c") == []
    assert _plan(before, after, changed, "api-1.b") == [TypeUrl.ROUTE]


def test_export_widened_reaches_the_newly_seeing_namespace(tmp_path: Path) -> None:
    """The new version of the object counts as much as the old one."""
    before, _ = _push(tmp_path, _vs("api", "b", "5s", export='"."'))
    after, changed = _push(tmp_path, _vs("api", "b", "5s", export='"*"'), before, 2)
    assert _plan(before, after, changed, "other.c") == [TypeUrl.ROUTE]


def test_destination_rule_reaches_its_hosts_own_proxies(tmp_path: Path) -> None:
    before, _ = _push(tmp_path, _dr("api", "b", 10))
    after, changed = _push(tmp_path, _dr("api", "b", 20), before, 2)
    assert _plan(before, after, changed, "client.a") == []
    # api's own pod: its inbound clusters read the rule too.
    assert TypeUrl.CLUSTER in _plan(before, after, changed, "api-1.b")
    assert TypeUrl.CLUSTER in _plan(before, after, changed, "other.c")


def test_other_kinds_are_not_narrowed(tmp_path: Path) -> None:
    before, _ = _push(tmp_path, "")
    svc = """---
apiVersion: v1
kind: Service
metadata: {name: extra, namespace: b}
spec: {clusterIP: 10.96.0.30, ports: [{name: http, port: 7070}]}
"""
    after, changed = _push(tmp_path, svc, before, 2)
    assert _plan(before, after, changed, "client.a") != []


def _routes(push: PushContext, ref: str) -> dict[str, bytes]:
    proxy = proxy_for(push, ref)
    return {r.name: r.body for r in generate_resources(push, proxy, TypeUrl.ROUTE, None)}


def test_route_configs_of_untouched_ports_carry_over_byte_identical(tmp_path: Path) -> None:
    both = _vs("web", "a", "5s") + _vs("api", "b", "5s")
    before, _ = _push(tmp_path, both)
    old = _routes(before, "other.c")
    assert set(old) == {"8080", "9090"}
    edited = _vs("web", "a", "9s") + _vs("api", "b", "5s")
    after, changed = _push(tmp_path, edited, before, 2)
    assert carry_over(before, after, changed) == 1  # "9090" of the one class built so far
    warm = _routes(after, "other.c")
    cold_push, _ = _push(tmp_path, edited, None, 3)
    assert warm == _routes(cold_push, "other.c")  # the golden rule: warm == cold
    assert warm["9090"] == old["9090"] and warm["8080"] != old["8080"]


def test_nothing_carries_over_after_other_changes(tmp_path: Path) -> None:
    before, _ = _push(tmp_path, _vs("api", "b", "5s"))
    _routes(before, "other.c")
    after, changed = _push(tmp_path, _vs("api", "b", "5s") + _dr("web", "a", 3), before, 2)
    assert carry_over(before, after, changed) == 0
    delegate = """---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: part, namespace: b}
spec:
  http: [{route: [{destination: {host: api}}]}]
"""
    again, changed = _push(
        tmp_path, _vs("api", "b", "5s") + _dr("web", "a", 3) + delegate, after, 3
    )
    _routes(after, "other.c")
    assert carry_over(after, again, changed) == 0  # a delegate lands under other hosts


def test_unrelated_change_then_second_push_is_byte_identical(tmp_path: Path) -> None:
    """A push after a change that touches none of a proxy's hosts returns the very bytes."""
    before, _ = _push(tmp_path, _vs("web", "a", "5s") + _vs("api", "b", "5s"))
    first = _routes(before, "other.c")
    after, changed = _push(tmp_path, _vs("web", "a", "5s") + _vs("api", "b", "6s"), before, 2)
    carry_over(before, after, changed)
    second = _routes(after, "other.c")
    assert second["8080"] == first["8080"]


GATEWAYS = """---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: public, namespace: b}
spec:
  selector: {istio: ingress}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: internal, namespace: b}
spec:
  selector: {istio: internal}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: ingress-1, namespace: b, labels: {istio: ingress}}
status: {podIP: 10.0.1.1}
---
apiVersion: v1
kind: Pod
metadata: {name: internal-1, namespace: b, labels: {istio: internal}}
status: {podIP: 10.0.1.2}
"""


def _gateway_vs(timeout: str) -> str:
    return _vs("api", "b", timeout).replace("  http:", "  gateways: [public]\n  http:")


def _router_plan(prev: PushContext, push: PushContext, changed: set[ConfigKey], ref: str) -> Any:
    req = PushRequest(full=True, configs_updated=frozenset(changed), push=push)
    proxy = proxy_for(push, ref, ProxyType.ROUTER)
    return [t for t, _ in push_plan(prev, req, proxy, WATCHED, None)]


def test_gateway_virtual_service_reaches_only_its_gateways(tmp_path: Path) -> None:
    before, _ = _push(tmp_path, GATEWAYS + _gateway_vs("5s"))
    after, changed = _push(tmp_path, GATEWAYS + _gateway_vs("7s"), before, 2)
    assert _router_plan(before, after, changed, "ingress-1.b") == [TypeUrl.LISTENER, TypeUrl.ROUTE]
    assert _router_plan(before, after, changed, "internal-1.b") == []
    assert _plan(before, after, changed, "other.c") == []  # not bound to the mesh


def test_gateway_virtual_service_moving_to_the_mesh_reaches_sidecars(tmp_path: Path) -> None:
    before, _ = _push(tmp_path, GATEWAYS + _gateway_vs("5s"))
    after, changed = _push(tmp_path, GATEWAYS + _vs("api", "b", "5s"), before, 2)
    assert _plan(before, after, changed, "other.c") == [TypeUrl.ROUTE]
    assert _router_plan(before, after, changed, "ingress-1.b") != []  # it left the gateway


def test_over_grpc_an_unseen_change_pushes_nothing(tmp_path: Path) -> None:
    """The stream of a proxy that cannot see the changed VirtualService gets no response;
    the next visible change reaches it as usual."""
    hidden = VS.replace("hosts: [web]", "hosts: [web]\n  exportTo: [other]")

    async def scenario(h: Harness) -> None:
        s = h.stream()
        await _sync(h, s)
        _extra(tmp_path, hidden.format(timeout="7s"))
        while len(h.server.push_history) < 2:  # the unseen change's push is made
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        _extra(tmp_path, VS.format(timeout="7s"))
        pushed = await s.recv()  # the first response since the sync is the visible change's
        assert pushed.type_url == TypeUrl.ROUTE
        assert pushed.version_info.endswith("/3")
        s.close()

    _extra(tmp_path, hidden.format(timeout="5s"))
    run(tmp_path, scenario)
