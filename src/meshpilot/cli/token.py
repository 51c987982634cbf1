"""`meshpilot token issue`: a pod's bootstrap token for the CA (like `kubectl create token`);
and the CA options of `meshpilot discovery` (--ca-dir, --cacerts, TLS ports)."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import click

from meshpilot.config.duration import parse_duration
from meshpilot.security.identity import IdentityError
from meshpilot.security.tokens import DEFAULT_TOKEN_TTL, issue_token
from meshpilot.settings import Settings, default_ca_dir

__all__ = ["CaOptions", "ca_options", "token"]

F = TypeVar("F", bound=Callable[..., Any])

CA_PORT = 15011  # suggested port of the opt-in CA-only listener (not an Istio port)

_CA_DIR_HELP = (
    "The CA's private directory (0700): root key and certificate, token signing key, "
    "root-cert.pem.  [default: $MESHPILOT_CA_DIR or ~/.meshpilot/ca]"
)


@dataclass(frozen=True, slots=True)
class CaOptions:
    ca_dir: str | None
    cacerts: str | None
    root_cert_out: str | None
    secure_port: int | None
    mtls_port: int | None
    ca_port: int | None
    front: bool
    enabled: bool

    def apply(self, settings: Settings, moved_ports: bool) -> Settings:
        """Settings with the CA options; when the plaintext port was moved (tests, demo)
        and the TLS ports were not given, those take any free port instead of 15012/15013,
        so that several control planes can run side by side."""
        if not self.enabled:
            return replace(settings, ca_dir="")
        default_port = 0 if moved_ports else None
        ports = replace(
            settings.ports,
            xds_tls=_first(self.secure_port, default_port, settings.ports.xds_tls),
            xds_mtls=_first(self.mtls_port, default_port, settings.ports.xds_mtls),
            # Opt-in: a listener of the front Envoy (security/front_server.py).
            ca=None if self.ca_port is None or self.ca_port < 0 else self.ca_port,
        )
        return replace(
            settings,
            ports=ports,
            secure_front=self.front,
            ca_dir=self.ca_dir or settings.ca_dir or default_ca_dir(),
            cacerts=self.cacerts or settings.cacerts,
            root_cert_out=self.root_cert_out or settings.root_cert_out,
        )


def _first(*values: int | None) -> int:
    return next(v for v in values if v is not None)


def ca_options(func: F) -> F:
    """Add the CA options to a command; it receives them as `ca: CaOptions`."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["ca"] = CaOptions(
            ca_dir=kwargs.pop("ca_dir"),
            cacerts=kwargs.pop("cacerts"),
            root_cert_out=kwargs.pop("root_cert_out"),
            secure_port=kwargs.pop("secure_port"),
            mtls_port=kwargs.pop("mtls_port"),
            ca_port=kwargs.pop("ca_port"),
            front=kwargs.pop("front_envoy"),
            enabled=kwargs.pop("ca_enabled"),
        )
        return func(*args, **kwargs)

    options = [
        click.option("--ca-dir", metavar="DIR", help=_CA_DIR_HELP),
        click.option(
            "--cacerts",
            metavar="PATH",
            help="Plug in a CA in Istio's cacerts layout: a directory or a Secret YAML with "
            "ca-cert.pem, ca-key.pem, root-cert.pem, cert-chain.pem.",
        ),
        click.option(
            "--root-cert-out",
            metavar="FILE",
            help="Also write the public root certificate here (for proxies to verify with).",
        ),
        click.option(
            "--secure-port",
            type=int,
            help="TLS port for xDS and the CA (istiod's 15012).  [default: 15012; any free "
            "port when --xds-port is given]",
        ),
        click.option(
            "--mtls-port",
            type=int,
            help="The same services with a client certificate required (renewal by the "
            "current certificate).  [default: 15013; any free port when --xds-port is given]",
        ),
        click.option(
            "--ca-port",
            type=int,
            help="Also serve the CA alone over TLS on this port (e.g. 15011; token auth as on "
            "--secure-port), through the front Envoy.  [default: off]",
        ),
        click.option(
            "--front-envoy/--no-front-envoy",
            "front_envoy",
            default=True,
            show_default=True,
            help="Terminate TLS and HTTP/2 of the secure port in an Envoy next to the control "
            "plane (CA calls cost about half the CPU); off: grpc.aio serves it directly and "
            "never asks for a client certificate, so there an ADS stream proves its identity "
            "(needed for gateway secrets) by a token only, or on the mTLS port.",
        ),
        click.option(
            "--ca/--no-ca",
            "ca_enabled",
            default=True,
            show_default=True,
            help="Run the CA and the TLS ports.",
        ),
    ]
    decorated: Callable[..., Any] = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated  # type: ignore[return-value]


def _ttl(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = parse_duration(value) / 1e9
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from exc
    if seconds <= 0:
        raise click.BadParameter("must be positive, e.g. 1h", ctx, param)
    return seconds


@click.group()
def token() -> None:
    """Bootstrap tokens that workloads present to the CA."""


@token.command("issue")
@click.option("--namespace", "-n", required=True, help="The pod's namespace.")
@click.option("--service-account", required=True, help="The pod's service account.")
@click.option("--pod", required=True, help="The pod's name (recorded in the token).")
@click.option("--ca-dir", metavar="DIR", help=_CA_DIR_HELP)
@click.option(
    "--ttl",
    callback=_ttl,
    metavar="DURATION",
    help=f"Token lifetime, e.g. 1h.  [default: {int(DEFAULT_TOKEN_TTL.total_seconds() // 3600)}h]",
)
def issue(
    namespace: str, service_account: str, pod: str, ca_dir: str | None, ttl: float | None
) -> None:
    """Print a token proving spiffe://<trust-domain>/ns/NAMESPACE/sa/SERVICE_ACCOUNT to the
    CA of the control plane that owns CA_DIR (the agent sends it as a bearer token)."""
    directory = Path(ca_dir or Settings.from_env().ca_dir or default_ca_dir()).expanduser()
    lifetime = dt.timedelta(seconds=ttl) if ttl else DEFAULT_TOKEN_TTL
    try:
        value = issue_token(directory, namespace, service_account, pod, lifetime)
    except IdentityError as exc:
        raise click.BadParameter(str(exc)) from exc
    except OSError as exc:
        raise click.ClickException(f"{directory}: {exc.strerror or exc}") from exc
    click.echo(value)
