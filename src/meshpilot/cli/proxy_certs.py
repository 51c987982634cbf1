"""The proxy agent's workload certificates from its command line: `--root-cert`,
`--ca-address`, `--token-file`; without them, a control plane on this machine found through
its CA dir (agent/local_ca.py), as the README's hand-run mesh needs."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from meshpilot.agent.certs.rotation import RotationPolicy
from meshpilot.agent.certs.service import CertOptions
from meshpilot.agent.local_ca import LocalCa, find_local_ca
from meshpilot.agent.options import AgentOptions, discovery_addresses
from meshpilot.config.duration import parse_duration
from meshpilot.errors import MeshpilotError
from meshpilot.settings import Ports, default_ca_dir

__all__ = ["cert_options", "seconds"]

log = logging.getLogger("meshpilot.agent")


def cert_options(
    options: AgentOptions, kw: dict[str, Any], ca_dir_setting: str
) -> tuple[AgentOptions, CertOptions | None]:
    """The certificate options, and the agent options with the xDS address and TLS the
    local control plane calls for (a gateway moves to its TLS port)."""
    if kw["root_cert"] is not None or kw["token_file"] or kw["ca_address"]:
        return options, _given(options, kw)
    ca_dir = (kw["ca_dir"] or Path(ca_dir_setting or default_ca_dir())).expanduser().absolute()
    local = find_local_ca(ca_dir, options)
    if local is None:
        if not options.secure_xds:
            log.warning(
                "no --root-cert, and no control plane of this user on this machine serves "
                "%s (no record in %s): no workload certificate, so a mesh with mTLS keeps "
                "Envoy unready; start `meshpilot discovery` here first, or give --root-cert "
                "and --token-file (`meshpilot token issue`)",
                options.discovery_address, ca_dir,
            )  # fmt: skip
        return options, _given(options, kw)
    return _local(options, local, kw)


def _local(
    options: AgentOptions, local: LocalCa, kw: dict[str, Any]
) -> tuple[AgentOptions, CertOptions]:
    options = replace(options, discovery_address=local.xds_address, xds_tls=local.xds_tls)
    log.info(
        "control plane on this machine (pid %d, CA dir %s): root %s, CA at %s, xDS to %s%s; "
        "tokens signed with the CA dir's key",
        local.record.pid, local.ca_dir, local.root_cert, local.ca_address,
        local.xds_address, " over TLS" if local.xds_tls else "",
    )  # fmt: skip
    certs = CertOptions(
        ca_address=local.ca_address,
        root_cert=local.root_cert,
        local_ca_dir=local.ca_dir,
        policy=_rotation(kw),
    )
    return options, certs


def _given(options: AgentOptions, kw: dict[str, Any]) -> CertOptions | None:
    """Workload certificates: on with --root-cert; required by xDS over TLS."""
    root = kw["root_cert"]
    if root is None:
        if options.secure_xds:
            raise MeshpilotError(
                f"xDS over TLS to {options.discovery_address} needs --root-cert "
                "(the control plane's root-cert.pem)"
            )
        if kw["ca_address"] or kw["token_file"]:
            raise MeshpilotError("--ca-address and --token-file need --root-cert")
        return None
    ca = kw["ca_address"] or (options.discovery_address if options.secure_xds else None)
    if ca is None:
        raise MeshpilotError(
            "--ca-address is needed when xDS is plaintext (the CA listens on TLS, "
            f"port {Ports().xds_tls})"
        )
    # unix:<path> reaches a CA from another netns; `a,b` lists replicas: each is checked
    discovery_addresses(ca)
    return CertOptions(
        ca_address=ca,
        root_cert=root.absolute(),
        token_file=kw["token_file"].absolute() if kw["token_file"] else None,
        policy=_rotation(kw),
    )


def _rotation(kw: dict[str, Any]) -> RotationPolicy:
    return RotationPolicy(ttl_s=round(seconds(kw["secret_ttl"])), rotate_at=kw["secret_rotation"])


def seconds(text: str) -> float:
    """`5s`, `500ms` or a plain number of seconds."""
    try:
        return float(text)
    except ValueError:
        return parse_duration(text) / 1e9
