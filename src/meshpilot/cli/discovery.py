"""`meshpilot discovery`: the control plane (istiod's pilot-discovery) over watched files."""

from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import replace

import click

from meshpilot.cli.token import CaOptions, ca_options
from meshpilot.config.duration import parse_duration
from meshpilot.discovery import run_discovery
from meshpilot.errors import MeshpilotError
from meshpilot.settings import Settings

__all__ = ["discovery"]


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_duration(value) / 1e9
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from exc


@click.command()
@click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    metavar="PATH",
    help="YAML/JSON file or directory to serve and watch (repeatable).",
)
@click.option(
    "--store",
    "store_dir",
    metavar="URL",
    help="Serve a live store instead: a directory (created if absent; file:///DIR too) or "
    "etcd://HOST:PORT[,HOST:PORT]/PREFIX (etcd+https://...?cacert=F&cert=F&key=F).",
)
@click.option(
    "--listen-address",
    metavar="IP",
    help="Address the xDS and monitoring ports bind to.  [default: 127.0.0.1]",
)
@click.option("--xds-port", type=int, help="Plaintext gRPC xDS port.  [default: 15010]")
@click.option("--monitoring-port", type=int, help="HTTP debug and metrics port.  [default: 15014]")
@click.option(
    "--webhook-port",
    type=int,
    help="HTTPS port of the injection webhook (POST /inject), served with the CA; -1: off.  "
    "[default: 15017; any free port when --xds-port is given]",
)
@click.option(
    "--revision",
    metavar="REV",
    help="This control plane's revision (Istio's REVISION): injector ConfigMap "
    "istio-sidecar-injector-REV, webhook certificate istiod-REV.istio-system.svc.",
)
@click.option(
    "--trace-sampling",
    metavar="PERCENT",
    type=click.FloatRange(0, 100),
    help="Percent of requests traced where neither Telemetry nor the mesh config's "
    "defaultConfig.tracing.sampling says (Istio's PILOT_TRACE_SAMPLING).  "
    "[default: $PILOT_TRACE_SAMPLING, else 1]",
)
@click.option(
    "--webhook-config-out",
    metavar="PATH",
    help="Write the MutatingWebhookConfiguration of the webhook (caBundle: the CA root, url: "
    "the webhook's address) to PATH when it starts.",
)
@click.option(
    "--xds-uds",
    metavar="PATH",
    help="Also serve plaintext xDS on this Unix socket (for proxies in other network namespaces).",
)
@click.option(
    "--secure-uds",
    metavar="PATH",
    help="Also serve the TLS port (xDS + CA) on this Unix socket, through the front Envoy "
    "unless --no-front-envoy; callers prove their identity as on the TLS port (a client "
    "certificate, or a token).",
)
@click.option(
    "--debounce",
    callback=_duration,
    metavar="DURATION",
    help="Quiet time that ends a burst of changes before a push, e.g. 100ms "
    "(Istio's PILOT_DEBOUNCE_AFTER).",
)
@click.option(
    "--debounce-after-write",
    callback=_duration,
    metavar="DURATION",
    help="Quiet time after whole writes of the --store (a sync wave, an apply), default 0s: "
    "pushed at once; never longer than --debounce.",
)
@click.option(
    "--vhds",
    is_flag=True,
    help="Opt-in, not Istio's output: serve Delta xDS sidecars their outbound HTTP route "
    "configs' virtual hosts by VHDS, so a VirtualService change sends only the virtual hosts "
    "it changed.",
)
@click.option(
    "--lease-ttl",
    type=click.IntRange(1, 3600),
    default=5,
    show_default=True,
    help="On etcd: seconds of the lease of the revision's webhook writer; one replica "
    "writes the webhook configuration, a standby takes over this long after it dies.",
)
@ca_options
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
def discovery(
    filenames: tuple[str, ...],
    store_dir: str | None,
    listen_address: str | None,
    xds_port: int | None,
    monitoring_port: int | None,
    webhook_port: int | None,
    revision: str | None,
    trace_sampling: float | None,
    webhook_config_out: str | None,
    xds_uds: str | None,
    secure_uds: str | None,
    debounce: float | None,
    debounce_after_write: float | None,
    vhds: bool,
    lease_ttl: int,
    ca: CaOptions,
    log_level: str,
) -> None:
    """Serve Envoy configuration (ADS, SotW and Delta) for the config in the files, and
    push changes to connected proxies as the files change."""
    if bool(filenames) == bool(store_dir):
        raise click.UsageError("give -f PATH (files to watch) or --store DIR, one of them")
    settings = Settings.from_env()
    ports = settings.ports
    if xds_port is not None:
        ports = replace(ports, xds_plaintext=xds_port)
    if monitoring_port is not None:
        ports = replace(ports, monitoring=monitoring_port)
    if webhook_port is not None:
        ports = replace(ports, webhook=None if webhook_port < 0 else webhook_port)
    elif xds_port is not None:  # several control planes side by side (tests, demo)
        ports = replace(ports, webhook=0)
    settings = replace(settings, ports=ports, lease_ttl=lease_ttl)
    if listen_address:
        settings = replace(settings, listen_address=listen_address)
    if revision:
        settings = replace(settings, revision=revision)
    if trace_sampling is not None:
        settings = replace(settings, trace_sampling=trace_sampling)
    if webhook_config_out:
        settings = replace(settings, webhook_config_out=webhook_config_out)
    if xds_uds:
        settings = replace(settings, xds_uds=xds_uds)
    if secure_uds:
        settings = replace(settings, secure_uds=secure_uds)
    if debounce is not None:
        settings = replace(settings, debounce_after=debounce)
    if debounce_after_write is not None:
        settings = replace(settings, debounce_after_write=debounce_after_write)
    if vhds:
        settings = replace(settings, vhds=True)
    settings = ca.apply(settings, moved_ports=xds_port is not None)
    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(run_discovery(filenames, settings, store_dir))
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc
    except OSError as exc:
        raise click.ClickException(f"cannot serve: {exc}") from exc
