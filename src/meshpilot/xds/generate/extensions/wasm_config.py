"""A WasmPlugin as the TypedExtensionConfig served over ECDS (Istio's BuildHTTPWasmFilter).

A `file://` module is loaded by Envoy from the local path, in the V8 runtime (the one that
runs in the wheel's Envoy). An http(s) module is fetched by the proxy's agent: its code is a
remote data source through the agent's `wasm-fetch` cluster (agent/wasm_fetch.py), with the
plugin's sha256, which Envoy checks too. An OCI image is not pulled, and Envoy takes no
remote module without its sha256: such a plugin is served as Istio's agent serves a module it
failed to fetch, an RBAC filter that denies every request (failStrategy FAIL_CLOSE,
FAIL_RELOAD) or allows them all (FAIL_OPEN), so a plugin that cannot run never silently
stops guarding traffic.
"""

from __future__ import annotations

import json
from urllib.parse import unquote, urlencode, urlsplit

from envoy.config.core.v3 import base_pb2, extension_pb2
from envoy.config.rbac.v3 import rbac_pb2
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2 as http_rbac_pb2
from envoy.extensions.filters.http.wasm.v3 import wasm_pb2 as http_wasm_pb2
from envoy.extensions.wasm.v3 import wasm_pb2
from google.protobuf import wrappers_pb2

from meshpilot.config.istio.wasm_plugin import WasmPlugin
from meshpilot.config.objects import ConfigObject
from meshpilot.xds.generate.extensions.wasm_plugins import resource_name
from meshpilot.xds.names import WASM_FETCH_CLUSTER
from meshpilot.xds.protos import duration, pack

__all__ = ["RUNTIME", "fetched_module", "local_module", "wasm_extension_config"]

RUNTIME = "envoy.wasm.runtime.v8"
FETCH_TIMEOUT_S = 30  # Istio's agent fetch timeout


def local_module(url: str) -> str | None:
    """The path of a `file://` URL; None for a module Envoy cannot read from disk."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "file" or not parts.path:
        return None
    return unquote(parts.path)


def _environment(plugin: WasmPlugin) -> wasm_pb2.EnvironmentVariables | None:
    if plugin.spec.vm_config is None or not plugin.spec.vm_config.env:
        return None
    env = wasm_pb2.EnvironmentVariables()
    for var in plugin.spec.vm_config.env:
        if var.value_from == "HOST":
            env.host_env_keys.append(var.name)
        else:
            env.key_values[var.name] = var.value
    return env


def _fallback(name: str, fail_open: bool) -> extension_pb2.TypedExtensionConfig:
    """No rules allow everything; ALLOW with no policies denies everything."""
    rules = None if fail_open else rbac_pb2.RBAC(action=rbac_pb2.RBAC.ALLOW)
    config = http_rbac_pb2.RBAC(rules=rules) if rules is not None else http_rbac_pb2.RBAC()
    return extension_pb2.TypedExtensionConfig(name=name, typed_config=pack(config))


def fetched_module(url: str, sha256: str) -> base_pb2.RemoteDataSource | None:
    """An http(s) module, fetched by the agent; None for other URLs, and without a sha256
    (Envoy takes a remote module only with its checksum)."""
    if urlsplit(url).scheme.lower() not in ("http", "https") or not sha256:
        return None
    query = urlencode({"url": url, "sha256": sha256.lower()})
    remote = base_pb2.RemoteDataSource(sha256=sha256.lower())
    # The host is a label: the cluster is the agent's socket.
    remote.http_uri.uri = f"http://wasm-fetch/fetch?{query}"
    remote.http_uri.cluster = WASM_FETCH_CLUSTER
    remote.http_uri.timeout.CopyFrom(duration(FETCH_TIMEOUT_S * 1_000_000_000))
    return remote


def wasm_extension_config(obj: ConfigObject[WasmPlugin]) -> extension_pb2.TypedExtensionConfig:
    spec = obj.model.spec
    name = resource_name(obj.namespace, obj.name)
    path = local_module(spec.url)
    remote = fetched_module(spec.url, spec.sha256) if path is None else None
    if path is None and remote is None:
        return _fallback(name, spec.fail_strategy == "FAIL_OPEN")
    vm = wasm_pb2.VmConfig(runtime=RUNTIME)
    if path is not None:
        vm.code.local.filename = path
    else:
        vm.code.remote.CopyFrom(remote)
    env = _environment(obj.model)
    if env is not None:
        vm.environment_variables.CopyFrom(env)
    config = wasm_pb2.PluginConfig(name=f"{obj.namespace}.{obj.name}", root_id=spec.plugin_name)
    config.vm_config.CopyFrom(vm)
    if spec.plugin_config is not None:
        text = json.dumps(spec.plugin_config, sort_keys=True, separators=(",", ":"))
        config.configuration.CopyFrom(pack(wrappers_pb2.StringValue(value=text)))
    config.failure_policy = (
        wasm_pb2.FAIL_OPEN if spec.fail_strategy == "FAIL_OPEN" else wasm_pb2.FAIL_CLOSED
    )
    if spec.fail_strategy == "FAIL_RELOAD":
        config.failure_policy = wasm_pb2.FAIL_RELOAD
    wasm = http_wasm_pb2.Wasm(config=config)
    return extension_pb2.TypedExtensionConfig(name=name, typed_config=pack(wasm))
