"""`meshpilot manifest generate | diff`: the Kubernetes manifests of an IstioOperator."""

from __future__ import annotations

from pathlib import Path

import click

from meshpilot.config.yaml_load import load_yaml_all
from meshpilot.errors import MeshpilotError
from meshpilot.install.diff import diff_manifests
from meshpilot.install.load import read_operator_files, resolve
from meshpilot.install.manifest import manifest_objects, manifest_yaml
from meshpilot.install.render.context import K8sObject

__all__ = ["manifest"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def manifest() -> None:
    """Render an installation's Kubernetes manifests (istioctl manifest)."""


@manifest.command("generate")
@click.option(
    "-f", "--filename", "files", multiple=True, help="IstioOperator file(s), merged in order."
)
@click.option(
    "--set",
    "-s",
    "sets",
    multiple=True,
    metavar="PATH=VALUE",
    help="Override a field, e.g. values.pilot.traceSampling=10.",
)
@click.option(
    "--revision", "-r", default=None, help="Control plane revision (a DNS-1123 label, e.g. 1-15-4)."
)
@click.option(
    "--component",
    default=None,
    help="Only this component: Base (the CRDs), Pilot, IngressGateways, EgressGateways, "
    "IstiodRemote.",
)
def generate(
    files: tuple[str, ...], sets: tuple[str, ...], revision: str | None, component: str | None
) -> None:
    """Print the manifests of every enabled component, in apply order (CRDs first)."""
    try:
        resolved = resolve(read_operator_files(list(files)), sets, revision)
        objects = manifest_objects(resolved, component)
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(manifest_yaml(objects), nl=False)


def _objects(path: str) -> list[K8sObject]:
    """A manifest's objects; a file of IstioOperators is rendered first."""
    try:
        docs = [d for d in load_yaml_all(Path(path).read_text(), path) if d is not None]
    except OSError as exc:
        raise click.ClickException(f"cannot read {path}: {exc.strerror}") from exc
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc
    if docs and all(isinstance(d, dict) and d.get("kind") == "IstioOperator" for d in docs):
        try:
            return manifest_objects(resolve(read_operator_files([path])))
        except MeshpilotError as exc:
            raise click.ClickException(str(exc)) from exc
    bad = [i for i, d in enumerate(docs) if not isinstance(d, dict) or "kind" not in d]
    if bad:
        raise click.ClickException(f"{path}: document {bad[0] + 1} is not a Kubernetes object")
    return docs


@manifest.command("diff")
@click.argument("a")
@click.argument("b")
def diff(a: str, b: str) -> None:
    """Compare two manifests (or two IstioOperator files) object by object; exit 1 when
    they differ."""
    result = diff_manifests(_objects(a), _objects(b), a, b)
    click.echo(result.render(a, b), nl=False)
    if not result.same:
        raise SystemExit(1)
