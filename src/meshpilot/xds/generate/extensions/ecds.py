"""ECDS: the TypedExtensionConfigs a proxy's HTTP filters name in `config_discovery`.

They are the configs of the WasmPlugins that apply to the proxy (wasm_config.py) and the
values of EnvoyFilter EXTENSION_CONFIG patches (operation ADD, as Istio serves them: the
filter that names one is added by an HTTP_FILTER patch). A name served twice is reported on
the EnvoyFilter patch and that patch's value left out: the WasmPlugin keeps its name.
"""

from __future__ import annotations

from collections.abc import Collection

from envoy.config.core.v3 import extension_pb2

from meshpilot.config.kinds import Kind
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.extensions.wasm_config import wasm_extension_config
from meshpilot.xds.generate.extensions.wasm_plugins import plugins_for
from meshpilot.xds.patch.reports import report
from meshpilot.xds.patch.selection import proxy_patches

__all__ = ["generate_extension_configs"]

_MEMO_KEY = "xds.ecds.wasm"


def _wasm_configs(push: PushContext, proxy: Proxy) -> list[extension_pb2.TypedExtensionConfig]:
    """Built once per plugin and push: proxies that share a plugin share its message."""
    memo = push.memo.setdefault(_MEMO_KEY, {})
    assert isinstance(memo, dict)
    out = []
    for plugin in plugins_for(push, proxy):
        found = memo.get(plugin.obj.key)
        if found is None:
            found = memo[plugin.obj.key] = wasm_extension_config(plugin.obj)
        out.append(found)
    return out


def _patch_configs(
    push: PushContext, proxy: Proxy, taken: set[str]
) -> list[extension_pb2.TypedExtensionConfig]:
    if not push.of_kind(Kind.ENVOY_FILTER):
        return []
    patches = proxy_patches(push, proxy)
    if patches is None:
        return []
    out = []
    for patch in patches.of("EXTENSION_CONFIG"):
        if patch.operation != "ADD":
            report(push, patch.problem("EXTENSION_CONFIG patches support only operation ADD"))
            continue
        value = patch.value
        if not isinstance(value, extension_pb2.TypedExtensionConfig) or not value.name:
            report(push, patch.problem("an EXTENSION_CONFIG value needs a name and typed_config"))
            continue
        if value.name in taken:
            report(push, patch.problem(f"the extension config {value.name!r} is served already"))
            continue
        taken.add(value.name)
        out.append(value)
    return out


def generate_extension_configs(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[extension_pb2.TypedExtensionConfig]:
    """The proxy's extension configs (only `names` unless None), sorted by name."""
    configs = _wasm_configs(push, proxy)
    configs += _patch_configs(push, proxy, {c.name for c in configs})
    if names is not None:
        configs = [c for c in configs if c.name in names]
    return sorted(configs, key=lambda c: c.name)
