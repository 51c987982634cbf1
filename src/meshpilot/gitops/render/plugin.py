"""Config management plugins (Argo CD ConfigManagementPlugin): init and generate commands
run in a private temporary copy of the source path, with Argo CD's environment, a
timeout that kills the whole process group, and stdout parsed as a YAML stream.

The copy is removed on every exit path, including timeouts, so a plugin that decrypts
secrets into its working directory leaves nothing behind (the gap of spec §10.7 step 6).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from meshpilot.gitops.render.errors import ManifestParseError, PluginError
from meshpilot.gitops.render.manifest import Manifest, parse_manifests
from meshpilot.gitops.render.request import AppContext, PluginCommand, PluginOptions, PluginSpec
from meshpilot.gitops.repo.tempdir import private_tempdir

__all__ = ["DEFAULT_BASE_ENV", "PluginSource", "plugin_env", "run_plugin"]

DEFAULT_BASE_ENV: Mapping[str, str] = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
_STDERR_TAIL = 2000


@dataclass(frozen=True, slots=True)
class PluginSource:
    """The source facts a plugin sees as ARGOCD_APP_* variables."""

    repo_url: str  # already scrubbed of credentials
    path: str
    target_revision: str
    revision: str  # the resolved commit


def plugin_env(
    app: AppContext, source: PluginSource, options: PluginOptions, base: Mapping[str, str]
) -> dict[str, str]:
    env = dict(base)
    env.update(
        ARGOCD_APP_NAME=app.name,
        ARGOCD_APP_NAMESPACE=app.namespace,
        ARGOCD_APP_REVISION=source.revision,
        ARGOCD_APP_REVISION_SHORT=source.revision[:7],
        ARGOCD_APP_SOURCE_REPO_URL=source.repo_url,
        ARGOCD_APP_SOURCE_PATH=source.path,
        ARGOCD_APP_SOURCE_TARGET_REVISION=source.target_revision,
    )
    if app.kube_version:
        env["KUBE_VERSION"] = app.kube_version
    for name, value in options.env:
        env[f"ARGOCD_ENV_{name}"] = value
    return env


def _run(step: str, spec: PluginSpec, cmd: PluginCommand, cwd: Path, env: dict[str, str]) -> str:
    argv = [*cmd.command, *cmd.args]
    if not argv:
        raise PluginError(f"plugin {spec.name!r}: {step} has no command")
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # so a timeout can kill the plugin's children too
        )
    except OSError as exc:
        raise PluginError(
            f"plugin {spec.name!r}: {step}: cannot run {argv[0]!r}: {exc.strerror}"
        ) from None
    try:
        out, err = proc.communicate(timeout=spec.timeout_seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise PluginError(
            f"plugin {spec.name!r}: {step} timed out after {spec.timeout_seconds:g}s"
        ) from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0:
        tail = err.decode("utf-8", "replace").strip()[-_STDERR_TAIL:]
        raise PluginError(
            f"plugin {spec.name!r}: {step} failed with exit code {proc.returncode}: {tail}"
        )
    return out.decode("utf-8", "replace")


def run_plugin(
    spec: PluginSpec,
    source_dir: Path,
    env: dict[str, str],
    temp_parent: Path | None = None,
) -> list[Manifest]:
    """Run init (if any) and generate in a private copy of `source_dir`."""
    if not source_dir.is_dir():
        raise PluginError(f"plugin {spec.name!r}: app path {source_dir.name!r} does not exist")
    with private_tempdir(temp_parent, prefix="meshpilot-plugin-", owned=True) as work:
        copy = work / "src"
        shutil.copytree(source_dir, copy, symlinks=True)
        if spec.init is not None:
            _run("init", spec, spec.init, copy, env)
        output = _run("generate", spec, spec.generate, copy, env)
    try:
        return parse_manifests(output, f"plugin {spec.name} output")
    except ManifestParseError as exc:
        raise PluginError(str(exc)) from None
