"""WasmPlugin: selector or targetRefs, module URL and checksum, enums, VM environment and
traffic match (Istio's validateWasmPlugin); warnings for what meshpilot does not apply (a
remote module, imagePullPolicy, NETWORK plugins)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from meshpilot.config.istio.wasm_plugin import EnvVar, WasmPlugin
from meshpilot.config.validation.common import (
    Path,
    Problems,
    check_enum,
    check_port,
    check_selector_or_targets,
    quoted,
)
from meshpilot.config.validation.target_refs import GATEWAY_OR_SERVICE, check_target_refs

__all__ = ["validate_wasm_plugin"]

SPEC: Path = ("spec",)
SCHEMES = ("", "file", "http", "https", "oci")
PHASES = ("UNSPECIFIED_PHASE", "AUTHN", "AUTHZ", "STATS")
PULL_POLICIES = ("UNSPECIFIED_POLICY", "IfNotPresent", "Always")
FAIL_STRATEGIES = ("FAIL_CLOSE", "FAIL_OPEN", "FAIL_RELOAD")
PLUGIN_TYPES = ("UNSPECIFIED_PLUGIN_TYPE", "HTTP", "NETWORK")
VALUE_FROM = ("INLINE", "HOST")
MODES = ("CLIENT_AND_SERVER", "CLIENT", "SERVER")
_HEX = re.compile(r"^[0-9a-fA-F]*$")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def validate_wasm_plugin(plugin: WasmPlugin, p: Problems) -> None:
    spec = plugin.spec
    labels = spec.selector.match_labels if spec.selector is not None else None
    check_selector_or_targets(
        p, labels, spec.target_ref is not None, bool(spec.target_refs), "WasmPlugin"
    )
    check_target_refs(p, spec.target_ref, spec.target_refs, GATEWAY_OR_SERVICE)
    if _check_url(p, spec.url):
        _note_unserved(p, plugin)
    if spec.sha256:
        _check_sha256(p, spec.sha256)
    check_enum(p, (*SPEC, "phase"), spec.phase, PHASES)
    check_enum(p, (*SPEC, "imagePullPolicy"), spec.image_pull_policy, PULL_POLICIES)
    check_enum(p, (*SPEC, "failStrategy"), spec.fail_strategy, FAIL_STRATEGIES)
    check_enum(p, (*SPEC, "type"), spec.type, PLUGIN_TYPES)
    if spec.vm_config is not None:
        _check_env(p, (*SPEC, "vmConfig", "env"), spec.vm_config.env)
    for index, selector in enumerate(spec.match):
        where = (*SPEC, "match", index)
        check_enum(p, (*where, "mode"), selector.mode, MODES)
        for port_index, port in enumerate(selector.ports):
            check_port(p, (*where, "ports", port_index, "number"), port.number)


def _check_url(p: Problems, url: str) -> bool:
    """True for a valid URL."""
    path = (*SPEC, "url")
    if not url:
        p.error(path, "url field needs to be set")
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError as exc:
        p.error(path, f"failed to parse url {quoted(url)}: {exc}")
        return False
    if _BAD_ESCAPE.search(url):  # Go's url.Parse refuses these; Python's does not look
        p.error(path, f"failed to parse url {quoted(url)}: invalid URL escape")
        return False
    # A URL without a scheme is an OCI image reference, as Istio reads it.
    scheme = parts.scheme.lower() if "://" in url else ""
    if scheme not in SCHEMES:
        p.error(
            path, f"unsupported scheme {quoted(scheme)}; use oci://, file://, http:// or https://"
        )
        return False
    return True


# What meshpilot does not do with a valid WasmPlugin, said where the user wrote it.
REMOTE = (
    "the OCI image {url} is not pulled (meshpilot serves file://, http:// and https:// "
    "modules): its filter {effect} until the module is a file or an http(s) URL"
)
NO_CHECKSUM = (
    "an http(s) module needs sha256 here (Envoy takes a fetched module only with its "
    "checksum): its filter {effect} until sha256 is set"
)
PULL_POLICY_IGNORED = "imagePullPolicy is ignored: meshpilot pulls no modules"
NETWORK_IGNORED = "type NETWORK is not applied: meshpilot serves HTTP WasmPlugins only"


def _note_unserved(p: Problems, plugin: WasmPlugin) -> None:
    spec = plugin.spec
    scheme = urlsplit(spec.url).scheme.lower() if "://" in spec.url else ""
    fail_open = spec.fail_strategy == "FAIL_OPEN"
    effect = "lets every request through (FAIL_OPEN)" if fail_open else "denies every request"
    if spec.url and scheme in ("", "oci"):
        p.warning((*SPEC, "url"), REMOTE.format(url=quoted(spec.url), effect=effect))
    elif scheme in ("http", "https") and not spec.sha256:
        p.warning((*SPEC, "url"), NO_CHECKSUM.format(effect=effect))
    if spec.image_pull_policy in PULL_POLICIES[1:]:
        p.warning((*SPEC, "imagePullPolicy"), PULL_POLICY_IGNORED)
    if spec.type == "NETWORK":
        p.warning((*SPEC, "type"), NETWORK_IGNORED)


def _check_sha256(p: Problems, sha256: str) -> None:
    path = (*SPEC, "sha256")
    if len(sha256) != 64:
        p.error(path, f"sha256 field must be 64 characters long (got {len(sha256)})")
    elif not _HEX.match(sha256):
        p.error(path, "sha256 field must be a hexadecimal string")


def _check_env(p: Problems, path: Path, env: list[EnvVar]) -> None:
    seen: set[str] = set()
    for index, var in enumerate(env):
        where = (*path, index)
        if not var.name:
            p.error((*where, "name"), "environment variable name must not be empty")
        elif var.name in seen:
            p.error((*where, "name"), f"duplicate environment variable name {quoted(var.name)}")
        seen.add(var.name)
        check_enum(p, (*where, "valueFrom"), var.value_from, VALUE_FROM)
        if var.value_from == "HOST" and var.value:
            p.error((*where, "value"), "value may only be set when valueFrom is INLINE")
