"""`meshpilot translate`: the Envoy configuration one proxy would receive."""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from typing import Any

import click
import yaml

from meshpilot.cli.common import files_option, load_inputs, print_diagnostics
from meshpilot.config.diagnostics import Diagnostic, Severity
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.heap import settle_long_lived_objects
from meshpilot.model.pod_proxy_type import AmbiguousProxyTypeError, infer_proxy_type
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
    help="sidecar, or router for a gateway.  [default: read from the pod: a `proxy router` "
    "container or Istio's gateway labels make it a router]",
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
    filenames: tuple[str, ...], proxy_ref: str, proxy_type: str | None, output: str, strict: bool
) -> None:
    """Print the listeners, routes, clusters, endpoints and secrets for one proxy."""
    loaded = load_inputs(filenames)
    print_diagnostics(loaded.diagnostics)
    push = build_push_context(loaded.served, loaded.mesh)
    settle_long_lived_objects()
    name, _, namespace = proxy_ref.partition(".")
    pod = push.pod(namespace or "default", name)
    if pod is None:
        pods = [obj for obj in loaded.objects if obj.key.kind is Kind.POD]
        raise click.ClickException(
            f"--proxy {proxy_ref}: no Pod named {name!r} in namespace {namespace or 'default'!r} "
            f"among the input objects{closest_pods(proxy_ref, pods)}"
        )
    try:
        kind = ProxyType(proxy_type) if proxy_type else infer_proxy_type(pod)
    except AmbiguousProxyTypeError as exc:
        raise click.ClickException(str(exc)) from exc
    # What it gets once connected over the TLS port with its own identity (secrets too).
    proxy = as_verified(proxy_from_pod(pod, kind))
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


def closest_pods(ref: str, pods: Sequence[ConfigObject[Any]]) -> str:
    """ "; closest: a.ns, b.ns" from the pods' POD.NAMESPACE names, or "" if none is close."""
    refs = sorted(f"{pod.name}.{pod.namespace}" for pod in pods)
    name = ref.partition(".")[0]
    starts = [r for r in refs if r.startswith(name)] if name else []
    close = difflib.get_close_matches(ref, refs, n=3, cutoff=0.5)
    found = list(dict.fromkeys([*starts, *close]))[:3]
    return f"; closest: {', '.join(found)}" if found else ""


def render(data: Any, output: str) -> str:
    if output == "yaml":
        return yaml.safe_dump(data, sort_keys=True, default_flow_style=False, width=100).rstrip()
    return json.dumps(data, indent=2, sort_keys=True)
