"""A WasmPlugin's ECDS config by its URL: an http(s) module with its sha256 comes through the
agent's fetcher; one without sha256, or an OCI image, is its fail-strategy RBAC stand-in
(deny all, or allow all for FAIL_OPEN), and analyze says so naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from envoy.extensions.filters.http.rbac.v3 import rbac_pb2
from envoy.extensions.filters.http.wasm.v3 import wasm_pb2
from google.protobuf import json_format

from meshpilot.config.istio.wasm_plugin import WasmPlugin
from meshpilot.config.loader import load_paths
from meshpilot.config.objects import ConfigObject
from meshpilot.xds.generate.extensions.wasm_config import wasm_extension_config

SHA = "2e50f8fad1e183958a4b7fce705ec78abb7829592816d6b7b11ac22730b359bb"
PLUGIN = """\
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {{name: p, namespace: shop}}
spec:
  url: {url}
  {extra}
"""


def _plugin(tmp_path: Path, url: str, extra: str = "") -> tuple[ConfigObject[WasmPlugin], Any]:
    path = tmp_path / "plugin.yaml"
    path.write_text(PLUGIN.format(url=url, extra=extra))
    loaded = load_paths([path])
    (obj,) = loaded.objects
    return cast(ConfigObject[WasmPlugin], obj), loaded


def test_an_http_module_with_its_sha256_is_fetched_by_the_agent(tmp_path: Path) -> None:
    obj, loaded = _plugin(tmp_path, "https://example.com/m/auth.wasm?v=1", f"sha256: {SHA}")
    assert not loaded.diagnostics
    config = wasm_extension_config(obj)
    assert config.name == "extensions.istio.io/wasmplugin/shop.p"
    wasm = wasm_pb2.Wasm()
    assert config.typed_config.Unpack(wasm)
    remote = json_format.MessageToDict(wasm.config.vm_config.code.remote)
    assert remote == {
        "httpUri": {
            "uri": "http://wasm-fetch/fetch?url=https%3A%2F%2Fexample.com%2Fm%2Fauth.wasm"
            f"%3Fv%3D1&sha256={SHA}",
            "cluster": "wasm-fetch",
            "timeout": "30s",
        },
        "sha256": SHA,
    }


def test_without_sha256_the_filter_denies_and_analyze_says_why(tmp_path: Path) -> None:
    obj, loaded = _plugin(tmp_path, "http://example.com/auth.wasm")
    rbac = rbac_pb2.RBAC()
    assert wasm_extension_config(obj).typed_config.Unpack(rbac)
    assert rbac.HasField("rules") and not rbac.rules.policies  # ALLOW nothing: deny all
    (warning,) = [str(d) for d in loaded.diagnostics]
    assert "spec.url: an http(s) module needs sha256 here" in warning
    assert "its filter denies every request until sha256 is set" in warning


def test_an_oci_image_failing_open_lets_requests_through(tmp_path: Path) -> None:
    obj, loaded = _plugin(tmp_path, "oci://ghcr.io/x/auth:1", "failStrategy: FAIL_OPEN")
    rbac = rbac_pb2.RBAC()
    assert wasm_extension_config(obj).typed_config.Unpack(rbac)
    assert not rbac.HasField("rules")  # no rules: allow all
    (warning,) = [str(d) for d in loaded.diagnostics]
    assert 'the OCI image "oci://ghcr.io/x/auth:1" is not pulled' in warning
