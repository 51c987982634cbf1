"""A container's environment and `$(VAR)` references, as kubelet resolves them.

Env entries are resolved in order: `value` (expanded against the entries before it), or
`valueFrom.fieldRef` (the downward API: the pod's name, namespace, uid, labels and
annotations, node name, service account, pod and host IP). `command` and `args` are then
expanded against the whole environment. Expansion (kubelet's expansion.go): `$(NAME)` of a
defined variable is its value, an undefined one stays as written, `$$` is a literal `$`.
Anything else (`secretKeyRef`, `configMapKeyRef`, `resourceFieldRef`, `envFrom`) is
refused with the container and variable named: there is no kubelet to ask for it here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot.errors import InputError

__all__ = ["PodFacts", "RunSpecError", "container_env", "expand"]

JSON = dict[str, Any]
_KEYED_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


class RunSpecError(InputError):
    """A pod spec that `meshpilot run` cannot start as written; the message names it."""


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What kubelet knows of a pod once it runs (the downward API's sources)."""

    name: str
    namespace: str
    ip: str
    host_ip: str = "127.0.0.1"
    node_name: str = "localhost"
    uid: str = ""


def expand(text: str, env: Mapping[str, str]) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "$" or i + 1 >= len(text):
            out.append(char)
            i += 1
        elif text[i + 1] == "$":
            out.append("$")
            i += 2
        elif text[i + 1] == "(" and (end := text.find(")", i + 2)) != -1:
            name = text[i + 2 : end]
            out.append(env[name] if name in env else text[i : end + 1])
            i = end + 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _field(path: str, pod: JSON, facts: PodFacts) -> str | None:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": facts.name,
        "metadata.namespace": facts.namespace,
        "metadata.uid": facts.uid,
        "spec.nodeName": facts.node_name,
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.podIP": facts.ip,
        "status.podIPs": facts.ip,
        "status.hostIP": facts.host_ip,
        "status.hostIPs": facts.host_ip,
    }
    if path in simple:
        return str(simple[path])
    if match := _KEYED_FIELD.match(path):
        values = meta.get(match.group(1)) or {}
        return str(values.get(match.group(2), ""))
    return None


def container_env(container: JSON, pod: JSON, facts: PodFacts) -> dict[str, str]:
    """The container's environment (a new dict; `pod` is the injected pod)."""
    where = f"pod {facts.namespace}/{facts.name} container {container.get('name')!r}"
    if container.get("envFrom"):
        raise RunSpecError(f"{where}: envFrom is not supported by meshpilot run")
    env: dict[str, str] = {}
    for entry in container.get("env") or []:
        name = str(entry.get("name", ""))
        if "valueFrom" not in entry:
            env[name] = expand(str(entry.get("value", "")), env)
            continue
        source = entry["valueFrom"] or {}
        ref = source.get("fieldRef") if isinstance(source, dict) else None
        value = _field(str(ref.get("fieldPath", "")), pod, facts) if ref else None
        if value is None:
            what = ", ".join(sorted(source)) if isinstance(source, dict) else "valueFrom"
            raise RunSpecError(
                f"{where}: env {name}: {what} is not supported by meshpilot run "
                "(fieldRef to the pod's metadata, spec.nodeName, spec.serviceAccountName, "
                "status.podIP and status.hostIP are)"
            )
        env[name] = value
    return env
