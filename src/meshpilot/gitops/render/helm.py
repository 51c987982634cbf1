"""Helm charts rendered in process through helm-python-sdk (libhelm_c; no helm binary).

Like Argo CD's `helm template`: release name defaults to the app name, namespace to the
destination namespace, CRDs from crds/ are included first unless skip_crds, value files are
applied in order (paths inside the repository only), then inline values, then parameters.
Manifest.file is the template path (e.g. `mychart/templates/deploy.yaml`) and line the
line within that template's rendered output.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import helm_python

from meshpilot.gitops.render.charts import ChartCache, prepare_dependencies
from meshpilot.gitops.render.errors import HelmRenderError, RenderError
from meshpilot.gitops.render.manifest import Manifest, parse_manifests
from meshpilot.gitops.render.request import AppContext, HelmOptions
from meshpilot.gitops.render.sops import AgeIdentity
from meshpilot.gitops.render.values import (
    apply_parameters,
    load_values_file,
    merge_values,
    parse_inline_values,
)

__all__ = ["HelmInputs", "compose_values", "render_chart", "render_helm"]


class HelmInputs:
    """Where a chart and its value files are, for error messages and path checks."""

    def __init__(self, chart_dir: Path, repo_root: Path, label: str) -> None:
        self.chart_dir, self.repo_root, self.label = chart_dir, repo_root, label

    def value_file(self, name: str) -> tuple[Path, str]:
        path = (self.chart_dir / name).resolve()
        root = self.repo_root.resolve()
        if not path.is_relative_to(root):
            raise RenderError(f"{self.label}: value file {name!r} is outside the repository")
        return path, path.relative_to(root).as_posix()


def compose_values(
    inputs: HelmInputs, options: HelmOptions, identities: Sequence[AgeIdentity]
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in options.value_files:
        path, shown = inputs.value_file(name)
        if not path.is_file():
            if options.ignore_missing_value_files:
                continue
            raise RenderError(f"{shown}: value file does not exist")
        values = merge_values(values, load_values_file(path, shown, identities))
    values = merge_values(values, parse_inline_values(options.values, f"{inputs.label}:values"))
    return apply_parameters(values, options.parameters)


def render_chart(
    chart_dir: Path,
    values: dict[str, Any],
    *,
    release: str,
    namespace: str,
    include_crds: bool,
    label: str,
) -> list[Manifest]:
    """Render a chart whose dependencies are already in charts/."""
    try:
        with helm_python.Chart.load(chart_dir) as chart:
            crds = chart.crds if include_crds else []
            rendered = chart.render(
                values=values, name=release, namespace=namespace, is_install=True
            )
    except helm_python.HelmError as exc:
        # helm's messages name templates and keys, not values, so they are safe to show.
        raise HelmRenderError(f"{label}: helm template failed: {exc}") from None
    out: list[Manifest] = []
    for crd in sorted(crds, key=lambda c: c.get("filename", "")):
        out.extend(parse_manifests(crd.get("data", ""), crd.get("filename") or crd["name"]))
    for template in sorted(rendered):
        if template.endswith("NOTES.txt") or not rendered[template].strip():
            continue
        out.extend(parse_manifests(rendered[template], template))
    return out


def render_helm(
    inputs: HelmInputs,
    options: HelmOptions,
    app: AppContext,
    identities: Sequence[AgeIdentity],
    chart_cache: ChartCache | None,
) -> list[Manifest]:
    """Render the chart at inputs.chart_dir (a private working copy: charts/ may change)."""
    if not (inputs.chart_dir / "Chart.yaml").is_file():
        raise RenderError(f"{inputs.label}: no Chart.yaml: not a Helm chart")
    prepare_dependencies(inputs.chart_dir, chart_cache, inputs.label)
    values = compose_values(inputs, options, identities)
    return render_chart(
        inputs.chart_dir,
        values,
        release=options.release_name or app.name,
        namespace=options.namespace or app.namespace,
        include_crds=not options.skip_crds,
        label=inputs.label,
    )
