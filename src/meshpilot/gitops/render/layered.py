"""The seed team's layout (spec §10.1, §10.7) as a built-in source type.

Repository layout (paths relative to the source path, normally the repo root):

    namespaces/<namespace>/Chart.yaml                      the chart (its deps via the chart cache)
    namespaces/<namespace>/common-values-*.yaml            cluster-common values        (1st)
    namespaces/<namespace>/common-values-*.secret.yaml     cluster-common SOPS values   (2nd)
    clusters/<cluster>/<namespace>/*-values-*.yaml         cluster-specific values      (3rd)
    clusters/<cluster>/<namespace>/*-values-*.secret.yaml  cluster-specific SOPS values (4th)

Each file is optional; two candidates for one slot is an error. Later files override
earlier ones (Helm -f order). A `.secret.yaml` file must be SOPS-encrypted (a plaintext one
is refused: it means a secret was committed in clear). SOPS files are decrypted in memory
only; unlike the seed team's plugin no plaintext file is ever written. Release name is the
app name, namespace the destination namespace, CRDs included.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from meshpilot.gitops.render.charts import ChartCache, prepare_dependencies
from meshpilot.gitops.render.errors import RenderError, SecretDecryptError
from meshpilot.gitops.render.helm import render_chart
from meshpilot.gitops.render.manifest import Manifest
from meshpilot.gitops.render.request import AppContext, LayeredOptions
from meshpilot.gitops.render.sops import AgeIdentity, is_sops_document, load_tree
from meshpilot.gitops.render.values import load_values_file, merge_values

__all__ = ["layered_value_files", "render_layered"]

SECRET_SUFFIX = ".secret.yaml"


def _one(directory: Path, pattern: str, secret: bool, root: Path) -> Path | None:
    found = sorted(
        p
        for p in directory.glob(pattern)
        if p.is_file() and p.name.endswith(SECRET_SUFFIX) == secret
    )
    if len(found) > 1:
        names = ", ".join(p.relative_to(root).as_posix() for p in found)
        raise RenderError(f"{directory.relative_to(root).as_posix()}: more than one of {names}")
    return found[0] if found else None


def layered_value_files(root: Path, options: LayeredOptions) -> list[Path]:
    """The value files of the four layers that exist, in merge order."""
    common = root / "namespaces" / options.namespace
    cluster = root / "clusters" / options.cluster / options.namespace
    slots = [
        (common, "common-values-*.yaml", False),
        (common, "common-values-*.secret.yaml", True),
        (cluster, "*-values-*.yaml", False),
        (cluster, "*-values-*.secret.yaml", True),
    ]
    files = []
    for directory, pattern, secret in slots:
        if directory.is_dir() and (found := _one(directory, pattern, secret, root)) is not None:
            files.append(found)
    return files


def _check_encrypted(path: Path, shown: str) -> None:
    if not is_sops_document(load_tree(path.read_text(encoding="utf-8"), shown)):
        raise SecretDecryptError(f"{shown}: named {SECRET_SUFFIX} but not SOPS-encrypted")


def render_layered(
    root: Path,
    options: LayeredOptions,
    app: AppContext,
    identities: Sequence[AgeIdentity],
    chart_cache: ChartCache | None,
) -> list[Manifest]:
    """Render the layout under `root` (a private working copy: charts/ may change)."""
    chart_dir = root / "namespaces" / options.namespace
    label = f"namespaces/{options.namespace}"
    if not (chart_dir / "Chart.yaml").is_file():
        raise RenderError(f"{label}/Chart.yaml: no chart for namespace {options.namespace!r}")
    values: dict[str, Any] = {}
    for path in layered_value_files(root, options):
        shown = path.relative_to(root).as_posix()
        if path.name.endswith(SECRET_SUFFIX):
            _check_encrypted(path, shown)
        values = merge_values(values, load_values_file(path, shown, identities))
    prepare_dependencies(chart_dir, chart_cache, label)
    return render_chart(
        chart_dir,
        values,
        release=app.name,
        namespace=app.namespace,
        include_crds=True,
        label=label,
    )
