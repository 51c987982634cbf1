"""Settings: every tunable of meshpilot, read once (by the CLI) and passed down, frozen.

Library code never reads the environment; `Settings.from_env()` is the one place that does,
called from cli/. Defaults are Istio's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

from meshpilot.errors import MeshpilotError

__all__ = [
    "GITOPS_CONFIG_ENV",
    "STORE_ENV",
    "Ports",
    "Settings",
    "default_ca_dir",
    "default_gitops_config",
    "default_store_dir",
]

STORE_ENV = "MESHPILOT_STORE"  # the live store (a directory or etcd:// URL) of apply/get/gitops
GITOPS_CONFIG_ENV = "MESHPILOT_GITOPS_CONFIG"  # the CLI's tokens of `gitops login`


@dataclass(frozen=True, slots=True)
class Ports:
    """Istio's well-known ports (DESIGN.md)."""

    xds_plaintext: int = 15010  # control plane: gRPC xDS
    xds_tls: int = 15012  # control plane: xDS + CA over TLS (token or client certificate)
    xds_mtls: int = 15013  # control plane: the same, client certificate required (renewal)
    # control plane: the CA alone over TLS through an Envoy (not an Istio port, opt-in:
    # `--ca-port`, e.g. 15011; it starts an Envoy); None: off
    ca: int | None = None
    monitoring: int = 15014  # control plane: debug HTTP + Prometheus metrics
    webhook: int | None = 15017  # control plane: injection webhook (HTTPS, with the CA); None: off
    envoy_admin: int = 15000  # proxy: Envoy admin, loopback only
    outbound_capture: int = 15001
    inbound_capture: int = 15006
    agent_status: int = 15020
    health: int = 15021  # proxy: /healthz/ready
    prometheus: int = 15090  # proxy: /stats/prometheus
    proxy_uid: int = 1337  # the proxy's UID, excluded from capture
    proxy_gid: int = 1337  # the proxy's GID (Istio's ProxyGID), excluded from capture too


@dataclass(frozen=True, slots=True)
class Settings:
    ports: Ports = Ports()
    # Control plane binds here; loopback unless told otherwise.
    listen_address: str = "127.0.0.1"
    # Debounce: a burst of changes becomes one push after this much quiet (Istio's
    # PILOT_DEBOUNCE_AFTER), and never waits longer than debounce_max.
    debounce_after: float = 0.100
    debounce_max: float = 10.0
    # The quiet window after whole writes of the live store (a GitOps sync wave, an
    # `apply` of many objects: all-or-nothing, nothing more of it is coming), so none:
    # writes landing while a push is being built still merge into the next one.
    # Kubernetes has no multi-object writes, so Istio debounces those too.
    debounce_after_write: float = 0.0
    push_concurrency: int = 25  # Istio's PILOT_PUSH_THROTTLE on 2 cores
    file_poll_interval: float = 0.2  # seconds between checks of watched files
    cache_assertions: bool = False  # rebuild on every cache hit and compare (tests)
    trust_domain: str = "cluster.local"
    # Also serve plaintext xDS on this Unix socket (Envoys in other network namespaces
    # share the filesystem, not the loopback); empty: TCP only.
    xds_uds: str = ""
    # The CA (security/): its private directory (0700: keys, token key), a plugged-in CA in
    # Istio's cacerts layout (directory or Secret YAML), and an extra public copy of the root.
    # Empty ca_dir: no CA and no TLS ports (library default; the CLI sets default_ca_dir()).
    ca_dir: str = ""
    cacerts: str = ""
    root_cert_out: str = ""
    # Also serve the TLS port (xDS + CA) on this Unix socket: pods in other network
    # namespaces reach it without a listener on a shared address. Empty: TCP only.
    secure_uds: str = ""
    # TLS and HTTP/2 of the secure port (15012) in an Envoy next to the control plane
    # (security/front_server.py): a CSR costs about half the CPU of grpc.aio's TLS port.
    secure_front: bool = True
    # Opt-in, not istiod's output: Delta xDS sidecars get their outbound HTTP route configs
    # with `vhds` and the virtual hosts as VHDS resources, so a VirtualService change sends
    # only the changed virtual hosts (xds/vhds.py). SotW proxies and gateways: unchanged.
    vhds: bool = False
    # The control plane's revision (Istio's REVISION): its injector ConfigMap
    # istio-sidecar-injector-<rev> and the webhook's name istiod-<rev>.istio-system.svc.
    revision: str = ""
    # Where discovery writes its MutatingWebhookConfiguration (YAML, caBundle = the CA root,
    # url = the webhook's address) each time the webhook starts; empty: not written.
    webhook_config_out: str = ""
    # Percent of requests traced when neither Telemetry nor the mesh config says (Istio's
    # PILOT_TRACE_SAMPLING, set from values.pilot.traceSampling by an installation).
    trace_sampling: float = 1.0
    # On etcd: seconds of the lease of the revision's webhook writer (one replica writes the
    # webhook configuration; a standby takes over this long after it dies).
    lease_ttl: int = 5

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Istio's environment variable names where they exist."""
        env = os.environ if env is None else env
        settings = cls()
        if "PILOT_DEBOUNCE_AFTER" in env:
            settings = replace(settings, debounce_after=_seconds(env["PILOT_DEBOUNCE_AFTER"]))
        if "PILOT_DEBOUNCE_MAX" in env:
            settings = replace(settings, debounce_max=_seconds(env["PILOT_DEBOUNCE_MAX"]))
        if "MESHPILOT_DEBOUNCE_AFTER_WRITE" in env:
            after_write = _seconds(env["MESHPILOT_DEBOUNCE_AFTER_WRITE"])
            settings = replace(settings, debounce_after_write=after_write)
        if "PILOT_PUSH_THROTTLE" in env:
            settings = replace(settings, push_concurrency=int(env["PILOT_PUSH_THROTTLE"]))
        if env.get("REVISION"):
            settings = replace(settings, revision=env["REVISION"])
        if env.get("PILOT_TRACE_SAMPLING"):
            settings = replace(settings, trace_sampling=_percent(env["PILOT_TRACE_SAMPLING"]))
        if "MESHPILOT_CA_DIR" in env:
            settings = replace(settings, ca_dir=env["MESHPILOT_CA_DIR"])
        return settings


def default_ca_dir() -> str:
    """Where `meshpilot discovery` keeps its CA unless told otherwise (MESHPILOT_CA_DIR)."""
    return os.path.expanduser("~/.meshpilot/ca")


def default_store_dir(env: Mapping[str, str] | None = None) -> str:
    """The live store: $MESHPILOT_STORE (a directory or a store URL such as
    etcd://host:port/prefix), else the directory ~/.meshpilot/store."""
    env = os.environ if env is None else env
    return env.get(STORE_ENV) or os.path.expanduser("~/.meshpilot/store")


def default_gitops_config(env: Mapping[str, str] | None = None) -> str:
    """Where `meshpilot gitops login` keeps its tokens (0600): $MESHPILOT_GITOPS_CONFIG, else
    $XDG_CONFIG_HOME/meshpilot/gitops.yaml, else ~/.config/meshpilot/gitops.yaml."""
    env = os.environ if env is None else env
    if env.get(GITOPS_CONFIG_ENV):
        return env[GITOPS_CONFIG_ENV]
    base = env.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return os.path.join(base, "meshpilot", "gitops.yaml")


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 100.0:
        raise MeshpilotError(f"PILOT_TRACE_SAMPLING={text!r}: give a percent from 0 to 100")
    return value


def _seconds(text: str) -> float:
    from meshpilot.config.duration import parse_duration

    return parse_duration(text) / 1e9
