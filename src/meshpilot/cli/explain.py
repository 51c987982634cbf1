"""`meshpilot explain`: why a request goes where it goes, hop by hop."""

from __future__ import annotations

import json

import click

from meshpilot.cli.explain_inputs import Inputs, read_inputs
from meshpilot.cli.translate import closest_pods
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.pod import Pod
from meshpilot.config.objects import ConfigObject
from meshpilot.model.proxy import ProxyType

__all__ = ["explain"]


@click.command()
@click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    metavar="PATH",
    help="YAML/JSON file or directory (repeatable): explain offline, config generated here.",
)
@click.option(
    "--discovery",
    metavar="ADDRESS",
    help="A running control plane's monitoring address (host:15014): its objects and the "
    "config it serves each proxy.",
)
@click.option(
    "--config-dump",
    metavar="FILE",
    help="The source proxy's Envoy admin /config_dump (JSON): walk what that Envoy ran.",
)
@click.option("--from", "source", metavar="POD.NAMESPACE", help="The pod whose sidecar sends it.")
@click.option("--gateway", metavar="POD.NAMESPACE", help="The gateway pod that receives it.")
@click.option(
    "--pod",
    "describe",
    metavar="POD.NAMESPACE",
    help="Describe a pod instead (istioctl x describe pod): services, subsets, routes, mTLS.",
)
@click.option("-X", "--request", "method", default="GET", show_default=True, help="HTTP method.")
@click.option(
    "-H",
    "--header",
    "headers",
    multiple=True,
    metavar="'NAME: VALUE'",
    help="Request header (repeatable).",
)
@click.option(
    "-o", "--output", type=click.Choice(["text", "json", "svg"]), default="text", show_default=True
)
@click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True)
@click.argument("url", metavar="URL", required=False)
def explain(
    filenames: tuple[str, ...],
    discovery: str | None,
    config_dump: str | None,
    source: str | None,
    gateway: str | None,
    describe: str | None,
    method: str,
    headers: tuple[str, ...],
    output: str,
    timeout: float,
    url: str | None,
) -> None:
    """Walk URL (http://host:port/path, https://..., tcp://host:port, tls://sni:port) through
    the Envoy config of the --from sidecar or the --gateway, naming the object behind each hop."""
    from meshpilot.explain import ExplainError, build_scene, explain, parse_request, workload_of
    from meshpilot.explain.render_dot import render_dot
    from meshpilot.explain.render_text import render_text

    if not describe:
        if bool(source) == bool(gateway):
            raise click.UsageError(
                "give exactly one of --from POD.NAMESPACE or --gateway POD.NAMESPACE (or --pod)"
            )
        if not url:
            raise click.UsageError("give the request's URL (http://reviews:9080/, tcp://host:port)")
        try:
            request = parse_request(url, method, headers)
        except ExplainError as exc:
            raise click.ClickException(str(exc)) from exc
    inputs = read_inputs(filenames, discovery, config_dump, timeout)
    if describe:
        from meshpilot.explain.describe import describe_pod

        click.echo(describe_pod(inputs.push, _pod(inputs, describe, "--pod")))
        return
    ref = source or gateway or ""
    flag = "--from" if source else "--gateway"
    pod = _pod(inputs, ref, flag)
    kind = ProxyType.ROUTER if gateway else ProxyType.SIDECAR
    try:
        if inputs.source_dump is not None:
            dumped = inputs.source_dump
            origin = workload_of(inputs.push, pod, kind, lambda _pod, _kind: dumped)
        else:
            origin = workload_of(inputs.push, pod, kind, inputs.config_for)
        if origin.config is None:
            raise ExplainError(
                f"{flag} {ref}: the pod runs no sidecar (no security.istio.io/tlsMode: istio label)"
            )
        result = explain(origin, request, build_scene(inputs.push, inputs.config_for))
    except ExplainError as exc:
        raise click.ClickException(str(exc)) from exc
    if output == "json":
        click.echo(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    elif output == "svg":
        click.echo(_svg(render_dot(result)), nl=False)
    else:
        click.echo(render_text(result))


def _pod(inputs: Inputs, ref: str, flag: str) -> ConfigObject[Pod]:
    name, _, namespace = ref.partition(".")
    pod = inputs.push.pod(namespace or "default", name)
    if pod is None:
        pods = [obj for obj in inputs.objects if obj.key.kind is Kind.POD]
        raise click.ClickException(
            f"{flag} {ref}: no Pod named {name!r} in namespace {namespace or 'default'!r} "
            f"among the input objects{closest_pods(ref, pods)}"
        )
    return pod


def _svg(dot_text: str) -> str:
    """Graphviz's layout of the path (Debian's `graphviz` package provides `dot`)."""
    from meshpilot.explain import ExplainError
    from meshpilot.explain.live_mesh import svg_of

    try:
        return svg_of(dot_text)
    except ExplainError as exc:
        raise click.ClickException(str(exc).replace("the diagram", "-o svg")) from exc
