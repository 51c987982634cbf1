"""`meshpilot kube-inject`: istioctl kube-inject, sidecars added to the pods of files."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from meshpilot.errors import MeshpilotError
from meshpilot.inject.config import parse_injector
from meshpilot.inject.kube_inject import inject_documents, render_documents

__all__ = ["kube_inject"]


def _read(path: str | None, what: str) -> str | None:
    if path is None:
        return None
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise click.UsageError(f"cannot read {what} {path}: {exc.strerror}") from exc


@click.command("kube-inject")
@click.option(
    "-f", "--filename", required=True, help="Input Kubernetes resource file, or - for stdin."
)
@click.option("-o", "--output", "output", default=None, help="Write here instead of stdout.")
@click.option("--revision", "-r", default="", help="The control plane revision to inject for.")
@click.option(
    "--meshConfigFile",
    "mesh_file",
    default=None,
    help="Mesh config: the `mesh` key of ConfigMap istio[-<rev>], or the ConfigMap.",
)
@click.option(
    "--injectConfigFile",
    "config_file",
    default=None,
    help="Injector config: the `config` key of ConfigMap istio-sidecar-injector[-<rev>], "
    "or the ConfigMap.",
)
@click.option(
    "--valuesFile",
    "values_file",
    default=None,
    help="Injector values: the `values` key of that ConfigMap, or the ConfigMap.",
)
@click.option(
    "--output-format",
    type=click.Choice(["yaml", "json"]),
    default=None,
    help="Default: JSON for a JSON input, YAML otherwise.",
)
def kube_inject(
    filename: str,
    output: str | None,
    revision: str,
    mesh_file: str | None,
    config_file: str | None,
    values_file: str | None,
    output_format: str | None,
) -> None:
    """Add the istio-init and istio-proxy containers to the Pods, Deployments,
    StatefulSets, DaemonSets, ReplicaSets, Jobs and CronJobs of a file; other objects are
    written out unchanged. Without config files, Istio's defaults are used."""
    text = _read(filename, "input file") or ""
    try:
        injector = parse_injector(
            _read(config_file, "--injectConfigFile"),
            _read(values_file, "--valuesFile"),
            _read(mesh_file, "--meshConfigFile"),
            revision,
            (config_file or "", values_file or "", mesh_file or ""),
        )
        result = inject_documents(text, injector, "<stdin>" if filename == "-" else filename)
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc
    for message in (*injector.warnings, *result.messages):
        click.echo(message, err=True)
    as_json = result.json_input if output_format is None else output_format == "json"
    rendered = render_documents(result.documents, as_json)
    if output is None:
        click.echo(rendered, nl=False)
    else:
        try:
            Path(output).write_text(rendered)
        except OSError as exc:
            raise click.ClickException(f"cannot write {output}: {exc.strerror}") from exc
