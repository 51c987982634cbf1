"""Which WasmPlugins apply to a proxy, in Istio's order, and where each goes.

A plugin of the mesh's root namespace applies to every proxy its selector selects, one of
the proxy's own namespace likewise; no selector selects every workload. `targetRefs` name
Gateways (their pods carry the gateway-name label); a Service target is for waypoints,
which meshpilot does not run, so it selects no sidecar. Plugins are ordered by priority
(highest first), then creation time and name (Istio's sort), and grouped by phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from meshpilot.config.istio.wasm_plugin import WasmPlugin
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext

__all__ = ["RESOURCE_PREFIX", "SelectedPlugin", "plugins_for", "resource_name"]

# Istio's ECDS resource (and HTTP filter) name of a WasmPlugin: <prefix><namespace>.<name>.
RESOURCE_PREFIX = "extensions.istio.io/wasmplugin/"
_GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"
_MEMO_KEY = "xds.wasm.selected"


def resource_name(namespace: str, name: str) -> str:
    return f"{RESOURCE_PREFIX}{namespace}.{name}"


@dataclass(frozen=True, slots=True)
class SelectedPlugin:
    obj: ConfigObject[WasmPlugin]

    @property
    def name(self) -> str:
        return resource_name(self.obj.namespace, self.obj.name)

    @property
    def phase(self) -> str:
        return self.obj.model.spec.phase

    def applies_to(self, mode: str, port: int) -> bool:
        """Istio's matchTrafficSelectors: no `match` applies everywhere; otherwise one entry
        whose mode fits the traffic (CLIENT: outbound and gateways, SERVER: inbound) and
        whose ports (if any) hold the listener's port."""
        match = self.obj.model.spec.match
        if not match:
            return True
        for selector in match:
            if selector.mode not in ("CLIENT_AND_SERVER", mode):
                continue
            if not selector.ports or any(p.number == port for p in selector.ports):
                return True
        return False


def _selects(obj: ConfigObject[WasmPlugin], proxy: Proxy) -> bool:
    spec = obj.model.spec
    refs = [*spec.target_refs, *([spec.target_ref] if spec.target_ref else [])]
    if refs:
        return proxy.type is ProxyType.ROUTER and any(
            ref.kind == "Gateway"
            and (ref.namespace or obj.namespace) == proxy.namespace
            and proxy.labels.get(_GATEWAY_NAME_LABEL) == ref.name
            for ref in refs
        )
    if spec.selector is None:
        return True
    return all(proxy.labels.get(k) == v for k, v in spec.selector.match_labels.items())


def _order(obj: ConfigObject[WasmPlugin]) -> tuple[int, str, str, str]:
    priority = obj.model.spec.priority or 0
    created = obj.model.metadata.creation_timestamp or ""
    return (-priority, created, obj.namespace, obj.name)


def plugins_for(push: PushContext, proxy: Proxy) -> tuple[SelectedPlugin, ...]:
    """The HTTP WasmPlugins that apply to `proxy`, in filter order within a phase; memoised
    per push by what selection reads (type, namespace, labels)."""
    plugins = cast(tuple[ConfigObject[WasmPlugin], ...], push.of_kind(Kind.WASM_PLUGIN))
    if not plugins:
        return ()
    memo = push.memo.setdefault(_MEMO_KEY, {})
    assert isinstance(memo, dict)
    key = (proxy.type, proxy.namespace, tuple(sorted(proxy.labels.items())))
    found: Any = memo.get(key)
    if found is None:
        root = push.mesh.root_namespace
        chosen = [
            obj
            for obj in plugins
            if obj.namespace in (root, proxy.namespace)
            and obj.model.spec.type in ("UNSPECIFIED_PLUGIN_TYPE", "HTTP")
            and _selects(obj, proxy)
        ]
        found = memo[key] = tuple(SelectedPlugin(obj) for obj in sorted(chosen, key=_order))
    return cast(tuple[SelectedPlugin, ...], found)
