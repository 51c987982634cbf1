"""What `meshpilot run` starts for one injected pod, worked out from its spec alone.

The pod's directory stands for its volumes: volume NAME is the directory `<pod dir>/volumes/
NAME`, and an argument naming a path under one of the container's mounts (`--labels-file
/etc/istio/pod/labels`) is rewritten to the same file there. Volumes
are filled as kubelet fills them: `emptyDir` empty, `downwardAPI` files in the downward
API's `key="value"` format, the projected service account token and the CA root ConfigMap
by the runner (it holds the CA). Kinds of volume a runner cannot fill are refused.

Containers run their `command` + `args` with `$(VAR)` expanded (env.py). Injected
containers (istio-init, istio-proxy) have no command: their image's entrypoint is
`meshpilot`. An app container without a command is refused: there are no images here.
Init containers run first, to completion, then the containers in their order; a container
with a postStart hook is started and its hook must succeed before the next one starts
(kubelet's order: with holdApplicationUntilProxyStarts the proxy comes first and its hook
is `meshpilot proxy wait`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from meshpilot.inject.merge import INJECTED_CONTAINERS
from meshpilot.runtime.run.env import PodFacts, RunSpecError, container_env, expand

__all__ = ["ContainerPlan", "PodPlan", "VolumePlan", "downward_file", "plan_pod"]

JSON = dict[str, Any]
MESHPILOT = "meshpilot"  # the entrypoint of the proxy image's containers
_FILLED_BY_RUNNER = {"istio-ca-root-cert"}  # ConfigMaps the runner writes (the CA root)


@dataclass(frozen=True, slots=True)
class VolumePlan:
    name: str
    path: Path  # <pod dir>/volumes/<name>: where the mounts of it point
    kind: str  # emptyDir, downwardAPI, token, ca-root
    files: dict[str, str] = field(default_factory=dict)  # downwardAPI: file → content
    token_file: str = ""  # token: the file name of the projected token


@dataclass(frozen=True, slots=True)
class ContainerPlan:
    name: str
    argv: tuple[str, ...]
    env: dict[str, str]
    mounts: dict[str, Path]  # mountPath in the container → directory of the pod
    post_start: tuple[str, ...] = ()
    run_as_proxy: bool = False  # istio-proxy: runAsUser 1337 (the capture lets it through)


@dataclass(frozen=True, slots=True)
class PodPlan:
    facts: PodFacts
    directory: Path
    volumes: tuple[VolumePlan, ...]
    init_containers: tuple[ContainerPlan, ...]
    containers: tuple[ContainerPlan, ...]

    @property
    def proxy(self) -> ContainerPlan | None:
        return next((c for c in self.containers if c.name == "istio-proxy"), None)


def downward_file(values: dict[str, str]) -> str:
    """The downward API's format for labels and annotations: `key="value"` lines, sorted,
    values quoted as Go's %q does for these strings."""
    return "\n".join(f"{k}={json.dumps(v)}" for k, v in sorted(values.items()))


def _volume(volume: JSON, pod: JSON, facts: PodFacts, root: Path) -> VolumePlan:
    name = str(volume.get("name", ""))
    path = root / "volumes" / name
    where = f"pod {facts.namespace}/{facts.name} volume {name!r}"
    if "emptyDir" in volume:
        return VolumePlan(name, path, "emptyDir")
    if "downwardAPI" in volume:
        meta = pod.get("metadata") or {}
        files = {}
        for item in (volume["downwardAPI"] or {}).get("items") or []:
            field_path = (item.get("fieldRef") or {}).get("fieldPath", "")
            if field_path not in ("metadata.labels", "metadata.annotations"):
                raise RunSpecError(f"{where}: downwardAPI {field_path!r} is not supported")
            files[str(item["path"])] = downward_file(meta.get(field_path.split(".")[1]) or {})
        return VolumePlan(name, path, "downwardAPI", files)
    sources = (volume.get("projected") or {}).get("sources") or []
    tokens = [s["serviceAccountToken"] for s in sources if "serviceAccountToken" in s]
    if len(tokens) == 1 and len(sources) == 1:
        return VolumePlan(name, path, "token", token_file=str(tokens[0].get("path", "token")))
    if (volume.get("configMap") or {}).get("name") in _FILLED_BY_RUNNER:
        return VolumePlan(name, path, "ca-root")
    kinds = ", ".join(sorted(k for k in volume if k != "name")) or "no source"
    raise RunSpecError(f"{where}: {kinds} volumes are not supported by meshpilot run")


def _mounts(container: JSON, volumes: dict[str, VolumePlan], where: str) -> dict[str, Path]:
    mounts: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(str(mount.get("name")))
        if volume is None:
            raise RunSpecError(f"{where}: volumeMount {mount.get('name')!r}: no such volume")
        mounts[str(mount.get("mountPath", ""))] = volume.path
    return mounts


def _rewrite(word: str, mounts: dict[str, Path]) -> str:
    """A path under a mount → the same file in the pod's directory."""
    if not word.startswith("/"):
        return word
    path = PurePosixPath(word)
    for mount, target in sorted(mounts.items(), key=lambda m: -len(m[0])):
        if path == PurePosixPath(mount) or PurePosixPath(mount) in path.parents:
            return str(target / path.relative_to(mount))
    return word


def _container(
    container: JSON, pod: JSON, facts: PodFacts, volumes: dict[str, VolumePlan]
) -> ContainerPlan:
    name = str(container.get("name", ""))
    where = f"pod {facts.namespace}/{facts.name} container {name!r}"
    command = list(container.get("command") or [])
    if not command and name in INJECTED_CONTAINERS:
        command = [MESHPILOT]
    if not command:
        raise RunSpecError(
            f"{where}: no command: meshpilot run starts a container's command on this "
            "machine (there are no images to take an entrypoint from)"
        )
    env = container_env(container, pod, facts)
    mounts = _mounts(container, volumes, where)
    argv = tuple(
        _rewrite(expand(str(w), env), mounts) for w in [*command, *(container.get("args") or [])]
    )
    hook = ((container.get("lifecycle") or {}).get("postStart") or {}).get("exec") or {}
    post_start = tuple(_rewrite(expand(str(w), env), mounts) for w in hook.get("command") or [])
    run_as = (container.get("securityContext") or {}).get("runAsUser")
    return ContainerPlan(name, argv, env, mounts, post_start, run_as == 1337)


def plan_pod(pod: JSON, facts: PodFacts, directory: Path) -> PodPlan:
    """The plan of an (injected) pod; RunSpecError naming what cannot run."""
    spec = pod.get("spec") or {}
    volumes = {
        v.name: v
        for v in (_volume(raw, pod, facts, directory) for raw in spec.get("volumes") or [])
    }
    inits = tuple(_container(c, pod, facts, volumes) for c in spec.get("initContainers") or [])
    containers = tuple(_container(c, pod, facts, volumes) for c in spec.get("containers") or [])
    if not containers:
        raise RunSpecError(f"pod {facts.namespace}/{facts.name}: no containers")
    return PodPlan(facts, directory, tuple(volumes.values()), inits, containers)
