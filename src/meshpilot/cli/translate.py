"""`meshpilot translate`: the Envoy configuration one proxy would receive."""

from __future__ import annotations

import json
from typing import Any

import click
import yaml

from meshpilot.cli.common import files_option, load_inputs, print_diagnostics
from meshpilot.config.diagnostics import Diagnostic, Severity
from meshpilot.heap import settle_long_lived_objects
from meshpilot.model.proxy import ProxyType, as_verified, proxy_from_pod
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.xds.generate import generate_proxy_config

__all__ = ["translate"]


@click.command()
@files_option
@click.option(
    "--proxy",
    "proxy_ref",
    required=True,
    metavar="POD.NAMESPACE",
    help="The Pod whose proxy to translate for, as name.namespace.",
)
@click.option(
    "--type",
    "proxy_type",
    type=click.Choice(["sidecar", "router"]),
    default="sidecar",
    show_default=True,
    help="sidecar, or router for a gateway.",
)
@click.option(
    "-o", "--output", type=click.Choice(["json", "yaml"]), default="json", show_default=True
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 1 on any error: an invalid object or a finding of `meshpilot analyze`.",
)
def translate(
    filenames: tuple[str, ...], proxy_ref: str, proxy_type: str, output: str, strict: bool
) -> None:
    """Print the listeners, routes, clusters, endpoints and secrets for one proxy."""
    loaded = load_inputs(filenames)
    print_diagnostics(loaded.diagnostics)
    push = build_push_context(loaded.objects, loaded.mesh)
    settle_long_lived_objects()
    name, _, namespace = proxy_ref.partition(".")
    pod = push.pod(namespace or "default", name)
    if pod is None:
        raise click.ClickException(
            f"--proxy {proxy_ref}: no Pod named {name!r} in namespace {namespace or 'default'!r} "
            "among the input objects"
        )
    # What it gets once connected over the TLS port with its own identity (secrets too).
    proxy = as_verified(proxy_from_pod(pod, ProxyType(proxy_type)))
    config = generate_proxy_config(push, proxy)
    click.echo(render(config.to_dict(), output))
    if strict and (loaded.errors or _analysis_errors(push)):
        raise SystemExit(1)


def _analysis_errors(push: PushContext) -> list[Diagnostic]:
    """The analyzer's errors (IST0101 ...), printed to stderr: what --strict refuses."""
    from meshpilot.analysis import analyze

    errors = [d for d in analyze(push) if d.severity is Severity.ERROR]
    print_diagnostics(errors)
    return errors


def render(data: Any, output: str) -> str:
    if output == "yaml":
        return yaml.safe_dump(data, sort_keys=True, default_flow_style=False, width=100).rstrip()
    return json.dumps(data, indent=2, sort_keys=True)
