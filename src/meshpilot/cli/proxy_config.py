"""`meshpilot proxy-config listeners|routes|clusters|endpoints|secret|ecds|all [POD.NAMESPACE]`:
one proxy's Envoy configuration in istioctl's tables, or raw with -o json|yaml.

With --admin URL it is read from that Envoy's admin (/config_dump, /clusters); with --file
DUMP.json from a saved config dump (proxyinfo/from_file.py); otherwise from the control plane
(--discovery URL, /debug/config_dump?proxyID=): what that proxy would get.
The first line says which (on stderr with -o json|yaml, so the output stays parseable).
istioctl's aliases work: l, r, c, ep, s, a and the singular names.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from meshpilot.cli.proxy_status import (
    discovery_option,
    output_option,
    reported_errors,
    timeout_option,
)
from meshpilot.proxyinfo import (
    ClusterFilter,
    EndpointFilter,
    ListenerFilter,
    ProxyData,
    RouteFilter,
    cluster_table,
    endpoint_table,
    from_admin,
    from_control_plane,
    listener_table,
    redact_private_keys,
    render_raw,
    route_table,
    secret_table,
    select_clusters,
    select_endpoints,
    select_listeners,
    select_routes,
)
from meshpilot.proxyinfo.ecds import ecds_table
from meshpilot.proxyinfo.from_file import NO_ENDPOINTS, from_file, has_endpoints
from meshpilot.proxyinfo.secrets import secret_summary

__all__ = ["proxy_config"]

_ALIASES = {
    "listener": "listeners", "l": "listeners", "route": "routes", "r": "routes",
    "cluster": "clusters", "c": "clusters", "endpoint": "endpoints", "ep": "endpoints",
    "secrets": "secret", "s": "secret", "a": "all",
}  # fmt: skip


class _AliasedGroup(click.Group):
    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, _ALIASES.get(cmd_name, cmd_name))


@click.group("proxy-config", cls=_AliasedGroup)
def proxy_config() -> None:
    """Show one proxy's listeners, routes, clusters, endpoints or secrets, as
    `istioctl proxy-config` does."""


@dataclass(frozen=True, slots=True)
class _Request:
    proxy_ref: str | None
    admin: str | None
    file: str | None
    discovery: str
    proxy_type: str | None
    timeout: float
    output: str

    def fetch(self, health: bool = False, endpoints_only: bool = False) -> ProxyData:
        if self.admin and self.file:
            raise click.UsageError("--admin and --file are two sources: give one")
        with reported_errors():
            if self.file:
                return from_file(self.file, self.proxy_ref, endpoints_only)
            if self.admin:
                return from_admin(self.admin, self.proxy_ref, health, self.timeout)
            if not self.proxy_ref:
                raise click.UsageError(
                    "name the proxy as POD.NAMESPACE, or give --admin URL or --file DUMP.json"
                )
            return from_control_plane(self.discovery, self.proxy_ref, self.proxy_type, self.timeout)

    def emit(self, data: ProxyData, table: Callable[[], str], raw: Callable[[], Any]) -> None:
        for warning in data.warnings:
            click.echo(warning, err=True)
        if self.output == "short":
            click.echo(data.source)
            click.echo(table())
        else:
            click.echo(data.source, err=True)
            click.echo(render_raw(redact_private_keys(raw()), self.output))


def _source_options(command: Callable[..., None]) -> Callable[..., None]:
    """POD.NAMESPACE, --admin, --file, --discovery, --proxy-type, -o and --timeout, handed
    to the command as one `_Request`."""

    @functools.wraps(command)
    def run(
        proxy_ref: str | None, admin: str | None, file: str | None, discovery: str,
        proxy_type: str | None, timeout: float, output: str, **filters: Any,
    ) -> None:  # fmt: skip
        request = _Request(proxy_ref, admin, file, discovery, proxy_type, timeout, output)
        command(request, **filters)

    decorators = (
        click.argument("proxy_ref", metavar="[POD.NAMESPACE]", required=False),
        click.option(
            "--admin", metavar="URL", help="Read this Envoy's admin, e.g. http://127.0.0.1:15000."
        ),
        click.option(
            "-f",
            "--file",
            metavar="DUMP.json",
            help="Read a saved Envoy /config_dump (endpoints: taken with ?include_eds, or "
            "/clusters?format=json output) instead of a running proxy.",
        ),
        discovery_option,
        click.option(
            "--proxy-type",
            type=click.Choice(["sidecar", "router"]),
            help="For a proxy not connected to the control plane: generate as this type.",
        ),
        timeout_option,
        output_option,
    )
    for decorate in reversed(decorators):
        run = decorate(run)
    return run


_verbose = click.option(
    "--verbose/--no-verbose", default=True, show_default=True, help="One row per chain or route."
)


@proxy_config.command()
@_source_options
@click.option("--address", default="", help="Only listeners on this address.")
@click.option("--port", type=int, default=0, help="Only listeners on this port.")
@click.option(
    "--type", "kind", default="", help="Only listeners of this type: HTTP, TCP, HTTP+TCP."
)
@_verbose
def listeners(request: _Request, address: str, port: int, kind: str, verbose: bool) -> None:
    """Listeners: address, port, filter chain match and destination."""
    data, where = request.fetch(), ListenerFilter(address, port, kind)
    request.emit(
        data,
        lambda: listener_table(data.dump, where, verbose).render(),
        lambda: select_listeners(data.dump, where),
    )


@proxy_config.command()
@_source_options
@click.option("--name", default="", help="Only the route configuration of this name.")
@_verbose
def routes(request: _Request, name: str, verbose: bool) -> None:
    """Route configurations: virtual hosts, domains, matches and VirtualServices."""
    data, where = request.fetch(), RouteFilter(name)
    request.emit(
        data,
        lambda: route_table(data.dump, where, verbose).render(),
        lambda: select_routes(data.dump, where),
    )


@proxy_config.command()
@_source_options
@click.option("--fqdn", default="", help="Only clusters of this service host.")
@click.option("--port", type=int, default=0, help="Only clusters of this port.")
@click.option("--subset", default="", help="Only clusters of this subset.")
@click.option(
    "--direction", type=click.Choice(["inbound", "outbound"]), help="Only this direction."
)
def clusters(request: _Request, fqdn: str, port: int, subset: str, direction: str | None) -> None:
    """Clusters: service, port, subset, direction, discovery type and DestinationRule."""
    data, where = request.fetch(), ClusterFilter(fqdn, port, subset, direction or "")
    request.emit(
        data,
        lambda: cluster_table(data.dump, where).render(),
        lambda: select_clusters(data.dump, where),
    )


@proxy_config.command()
@_source_options
@click.option("--address", default="", help="Only endpoints with this address.")
@click.option("--port", type=int, default=0, help="Only endpoints on this port.")
@click.option("--cluster", default="", help="Only endpoints of this cluster.")
@click.option("--status", default="", help="Only endpoints of this health status, e.g. HEALTHY.")
def endpoints(request: _Request, address: str, port: int, cluster: str, status: str) -> None:
    """Endpoints of every cluster, with their health (from Envoy when read with --admin)."""
    data = request.fetch(health=True, endpoints_only=True)
    if request.file and not has_endpoints(data):
        raise click.ClickException(NO_ENDPOINTS.format(path=request.file))
    where = EndpointFilter(address, port, cluster, status)
    request.emit(
        data,
        lambda: endpoint_table(data, where).render(),
        lambda: select_endpoints(data, where),
    )


@proxy_config.command()
@_source_options
@click.option(
    "--wide", is_flag=True, help="Add the SPIFFE IDENTITY and the CHAIN (not in istioctl's table)."
)
def secret(request: _Request, wide: bool) -> None:
    """Secrets: certificate chains and trust bundles, validity, serial numbers and dates, as
    istioctl shows them. Private keys are never shown."""
    data = request.fetch()
    request.emit(
        data,
        lambda: secret_summary(data.dump, wide),
        lambda: data.dump.section("SecretsConfigDump"),
    )


@proxy_config.command()
@_source_options
def ecds(request: _Request) -> None:
    """Extension configs sent over ECDS: name and type (an empty table when there are none)."""
    data = request.fetch()
    request.emit(
        data,
        lambda: ecds_table(data.dump).render(),
        lambda: data.dump.section("EcdsConfigDump"),
    )


@proxy_config.command("all")
@_source_options
def all_(request: _Request) -> None:
    """Everything: the clusters, listeners, routes, endpoints and secrets tables, or the
    whole config dump with -o json|yaml."""
    data = request.fetch(health=True)
    if request.file and not has_endpoints(data):
        note = NO_ENDPOINTS.format(path=request.file)
        data = dataclasses.replace(data, warnings=(*data.warnings, f"warning: {note}"))

    def tables() -> str:
        return "\n\n".join(
            table.render()
            for table in (
                cluster_table(data.dump, ClusterFilter()),
                listener_table(data.dump, ListenerFilter()),
                route_table(data.dump, RouteFilter()),
                endpoint_table(data, EndpointFilter()),
                secret_table(data.dump),
            )
        )

    request.emit(data, tables, lambda: data.dump.raw)
