"""`meshpilot profile list | dump | diff`: istioctl's install profiles."""

from __future__ import annotations

import difflib
from typing import Any

import click
import yaml

from meshpilot.errors import MeshpilotError
from meshpilot.install.load import OperatorFile, read_operator_files, resolve
from meshpilot.install.profiles import PROFILES
from meshpilot.install.spec import API_VERSION

__all__ = ["profile"]


def _dump(spec: dict[str, Any], config_path: str) -> str:
    data: Any = {"apiVersion": API_VERSION, "kind": "IstioOperator", "spec": spec}
    if config_path:
        node: Any = spec
        for key in config_path.removeprefix("spec.").split("."):
            if not isinstance(node, dict) or key not in node:
                raise click.ClickException(f"--config-path {config_path}: no such path")
            node = node[key]
        data = node
    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False, width=1_000_000)


def _spec(name: str | None, files: tuple[str, ...], sets: tuple[str, ...]) -> dict[str, Any]:
    try:
        loaded = read_operator_files(list(files))
        if name is not None:
            loaded.insert(0, OperatorFile("profile", {}, {"profile": name}))
        return resolve(loaded, sets).spec_tree
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def profile() -> None:
    """Istio's install profiles: the base IstioOperator an installation starts from."""


@profile.command("list")
def list_profiles() -> None:
    """List the profiles."""
    click.echo("Istio configuration profiles:")
    for name in sorted(PROFILES):
        click.echo(f"    {name}")


@profile.command("dump")
@click.argument("name", required=False)
@click.option(
    "-f", "--filename", "files", multiple=True, help="IstioOperator file(s) merged over it."
)
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE", help="Override a field.")
@click.option("--config-path", default="", help="Print only this path, e.g. values.global.proxy.")
def dump(name: str | None, files: tuple[str, ...], sets: tuple[str, ...], config_path: str) -> None:
    """Print a profile (default: `default`) as an IstioOperator, merged with -f and --set."""
    click.echo(_dump(_spec(name, files, sets), config_path), nl=False)


@profile.command("diff")
@click.argument("a")
@click.argument("b")
def diff(a: str, b: str) -> None:
    """Show the differences between two profiles; exit 1 when they differ."""
    left, right = _dump(_spec(a, (), ()), ""), _dump(_spec(b, (), ()), "")
    if left == right:
        click.echo(f"Profiles {a} and {b} are identical")
        return
    click.echo(f"The difference between profiles {a} and {b}:")
    lines = difflib.unified_diff(left.splitlines(True), right.splitlines(True), a, b)
    click.echo("".join(lines), nl=False)
    raise SystemExit(1)
