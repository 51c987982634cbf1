"""`meshpilot explain`: why a request goes where it goes, hop by hop."""

from __future__ import annotations

import json

import click

from meshpilot.cli.common import files_option, load_inputs, print_diagnostics
from meshpilot.cli.translate import closest_pods
from meshpilot.config.kinds import Kind
from meshpilot.model.proxy import ProxyType
from meshpilot.model.push_context import build_push_context

__all__ = ["explain"]


@click.command()
@files_option
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
@click.argument("url", metavar="URL", required=False)
def explain(
    filenames: tuple[str, ...],
    source: str | None,
    gateway: str | None,
    describe: str | None,
    method: str,
    headers: tuple[str, ...],
    output: str,
    url: str | None,
) -> None:
    """Walk URL (http://host:port/path, https://..., tcp://host:port, tls://sni:port) through
    the Envoy config of the --from sidecar or the --gateway, naming the object behind each hop."""
    from meshpilot.explain import ExplainError, build_scene, explain, parse_request, workload_of
    from meshpilot.explain.render_dot import render_dot
    from meshpilot.explain.render_text import render_text

    if describe:
        _describe(filenames, describe)
        return
    if bool(source) == bool(gateway):
        raise click.UsageError(
            "give exactly one of --from POD.NAMESPACE or --gateway POD.NAMESPACE (or --pod)"
        )
    if not url:
        raise click.UsageError("give the request's URL (http://reviews:9080/, tcp://mongodb:27017)")
    ref = source or gateway or ""
    try:
        request = parse_request(url, method, headers)
    except ExplainError as exc:
        raise click.ClickException(str(exc)) from exc
    loaded = load_inputs(filenames)
    print_diagnostics(loaded.diagnostics)
    push = build_push_context(loaded.served, loaded.mesh)
    name, _, namespace = ref.partition(".")
    pod = push.pod(namespace or "default", name)
    flag = "--from" if source else "--gateway"
    if pod is None:
        pods = [obj for obj in loaded.objects if obj.key.kind is Kind.POD]
        raise click.ClickException(
            f"{flag} {ref}: no Pod named {name!r} in namespace {namespace or 'default'!r} "
            f"among the input objects{closest_pods(ref, pods)}"
        )
    try:
        kind = ProxyType.ROUTER if gateway else ProxyType.SIDECAR
        origin = workload_of(push, pod, kind)
        if origin.config is None:
            raise ExplainError(
                f"{flag} {ref}: the pod runs no sidecar (no security.istio.io/tlsMode: istio label)"
            )
        result = explain(origin, request, build_scene(push))
    except ExplainError as exc:
        raise click.ClickException(str(exc)) from exc
    if output == "json":
        click.echo(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    elif output == "svg":
        click.echo(_svg(render_dot(result)), nl=False)
    else:
        click.echo(render_text(result))


def _describe(filenames: tuple[str, ...], ref: str) -> None:
    from meshpilot.explain.describe import describe_pod

    loaded = load_inputs(filenames)
    print_diagnostics(loaded.diagnostics)
    push = build_push_context(loaded.served, loaded.mesh)
    name, _, namespace = ref.partition(".")
    pod = push.pod(namespace or "default", name)
    if pod is None:
        pods = [obj for obj in loaded.objects if obj.key.kind is Kind.POD]
        raise click.ClickException(
            f"--pod {ref}: no Pod named {name!r} in namespace {namespace or 'default'!r} "
            f"among the input objects{closest_pods(ref, pods)}"
        )
    click.echo(describe_pod(push, pod))


def _svg(dot_text: str) -> str:
    """Graphviz's layout of the path (Debian's `graphviz` package provides `dot`)."""
    import shutil
    import subprocess

    dot = shutil.which("dot")
    if dot is None:
        raise click.ClickException("-o svg needs Graphviz's `dot` (apt-get install graphviz)")
    done = subprocess.run(
        [dot, "-Tsvg"], input=dot_text, capture_output=True, text=True, timeout=30, check=False
    )
    if done.returncode != 0:
        raise click.ClickException(f"dot -Tsvg failed: {done.stderr.strip()}")
    return done.stdout
