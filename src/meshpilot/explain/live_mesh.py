"""A running control plane as explain's input (its /debug/configz objects, with file:line,
and the config it serves each proxy from /debug/config_dump), and one request explained
over it: what `meshpilot explain --discovery` and the UI's request-path page share."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from meshpilot.config.kinds import Kind
from meshpilot.config.kube.pod import Pod
from meshpilot.config.loader import parse_mesh_config
from meshpilot.config.objects import ConfigObject
from meshpilot.explain.build import build_scene, workload_of
from meshpilot.explain.live import objects_from_configz, proxy_config_from_dump
from meshpilot.explain.request import ExplainError, Request
from meshpilot.explain.result import Explanation
from meshpilot.explain.walk import explain
from meshpilot.model.proxy import ProxyType
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.proxyinfo.fetch import DEFAULT_TIMEOUT, base_url, get_json
from meshpilot.xds.output import ProxyConfig

__all__ = ["LiveMesh", "explain_live", "read_live_mesh", "svg_of"]


@dataclass(frozen=True, slots=True)
class LiveMesh:
    push: PushContext
    objects: list[ConfigObject[Any]]
    config_for: Any  # meshpilot.explain.build.ConfigSource


def read_live_mesh(discovery: str, timeout: float = DEFAULT_TIMEOUT) -> LiveMesh:
    """FetchError when the control plane cannot be read."""
    base = base_url(discovery)
    configz = get_json(base, "/debug/configz", "the control plane", timeout)
    loaded = objects_from_configz(configz)
    mesh, _ = parse_mesh_config(configz.get("mesh") or {})
    push = build_push_context(loaded.served, mesh or loaded.mesh)

    def config_for(pod: ConfigObject[Pod], kind: ProxyType) -> ProxyConfig:
        target = f"/debug/config_dump?proxyID={quote(f'{pod.name}.{pod.namespace}')}&type={kind}"
        return proxy_config_from_dump(get_json(base, target, "the control plane", timeout), base)

    return LiveMesh(push, list(loaded.objects), config_for)


def explain_live(mesh: LiveMesh, ref: str, request: Request, gateway: bool = False) -> Explanation:
    """`request` from the sidecar of pod `ref` (POD.NAMESPACE), or into the gateway pod
    `ref`; ExplainError naming the pod when there is no such pod or it has no proxy."""
    name, _, namespace = ref.partition(".")
    pod = mesh.push.pod(namespace or "default", name)
    if pod is None:
        pods = sorted(f"{o.name}.{o.namespace}" for o in mesh.objects if o.key.kind is Kind.POD)
        known = ", ".join(pods[:20]) or "none"
        raise ExplainError(
            f"{ref}: no Pod named {name!r} in namespace {namespace or 'default'!r} (pods: {known})"
        )
    kind = ProxyType.ROUTER if gateway else ProxyType.SIDECAR
    origin = workload_of(mesh.push, pod, kind, mesh.config_for)
    if origin.config is None:
        raise ExplainError(
            f"{ref}: the pod runs no sidecar (no security.istio.io/tlsMode: istio label)"
        )
    return explain(origin, request, build_scene(mesh.push, mesh.config_for))


def svg_of(dot_text: str) -> str:
    """Graphviz's layout of a DOT graph (Debian's `graphviz` package provides `dot`)."""
    dot = shutil.which("dot")
    if dot is None:
        raise ExplainError("the diagram needs Graphviz's `dot` (apt-get install graphviz)")
    done = subprocess.run(
        [dot, "-Tsvg"], input=dot_text, capture_output=True, text=True, timeout=30, check=False
    )
    if done.returncode != 0:
        raise ExplainError(f"dot -Tsvg failed: {done.stderr.strip()}")
    return done.stdout
