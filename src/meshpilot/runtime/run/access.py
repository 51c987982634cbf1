"""How an injected pod's containers reach this machine's control plane, and run as its users.

An injected istio-proxy names `istiod.istio-system.svc:15012`, a cluster address no pod
namespace here can reach (discovery binds to loopback). The control plane offers pods its
TLS port (xDS and the CA, istiod's 15012) as a Unix socket instead, on the filesystem pods
share: the agent's `--discovery-address` becomes `unix:<secure socket>` with `--tls`, and its
CA is that same address (`--ca-address` dropped: the agent's default). It verifies the
control plane against the mesh root the runner put in the pod's `istiod-ca-cert` volume.

Users: the agent runs as root in the pod and starts Envoy as the pod's own proxy user
(runtime.pod_proxy_user: a UID no other pod's proxy has, group 1337), so istio-init's
`-u 1337` becomes that UID with `-g` its group: capture lets exactly this pod's Envoy out.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from meshpilot.runtime.pod import RunAs

__all__ = ["MESHPILOT_ARGV", "MeshAccess", "agent_argv", "capture_argv", "meshpilot_argv"]

# `meshpilot` run by this interpreter: works from a checkout without the script on PATH.
MESHPILOT_ARGV = (
    sys.executable,
    "-c",
    "import sys; from meshpilot.cli.main import main; sys.argv[0] = 'meshpilot'; main()",
)
_REPLACED = {"--discovery-address": 1, "--ca-address": 1, "--tls": 0, "--no-tls": 0}
_RUNNER_SET = {"--work-dir": 1, "--run-as-proxy-uid": 0, "--proxy-uid": 1, "--proxy-gid": 1}


@dataclass(frozen=True, slots=True)
class MeshAccess:
    """The control plane as pods here reach it (`meshpilot discovery --secure-uds`,
    `--root-cert-out`, `--ca-dir`)."""

    secure_socket: Path
    root_cert: Path
    ca_dir: Path  # the token authority's key: the runner issues each pod's token with it


def meshpilot_argv(argv: Sequence[str]) -> list[str]:
    """A container argv whose program is `meshpilot` (the proxy image's entrypoint)."""
    if argv and argv[0] == "meshpilot":
        return [*MESHPILOT_ARGV, *argv[1:]]
    return list(argv)


def _without(argv: Sequence[str], flags: dict[str, int]) -> list[str]:
    out: list[str] = []
    skip = 0
    for word in argv:
        if skip:
            skip -= 1
            continue
        name = word.split("=", 1)[0]
        if name in flags:
            skip = flags[name] if "=" not in word else 0
            continue
        out.append(word)
    return out


def agent_argv(
    argv: Sequence[str],
    access: MeshAccess,
    user: RunAs,
    work_dir: Path,
    socket: Path | None = None,
) -> list[str]:
    """The istio-proxy container's argv, pointed at the control plane's socket (`socket`:
    the pod's revision's, else `access`'s), Envoy as the pod's proxy user, the agent's
    files in `work_dir` (a short path: Unix sockets)."""
    kept = _without(argv, _REPLACED | _RUNNER_SET)
    return meshpilot_argv([
        *kept,
        "--discovery-address", f"unix:{socket or access.secure_socket}", "--tls",
        "--run-as-proxy-uid", "--proxy-uid", str(user.uid), "--proxy-gid", str(user.gid),
        "--work-dir", str(work_dir),
    ])  # fmt: skip


def capture_argv(argv: Sequence[str], user: RunAs) -> list[str]:
    """istio-init's argv with the pod's proxy user let through in place of 1337."""
    kept = _without(argv, {"-u": 1, "--proxy-uid": 1, "-g": 1, "--proxy-gid": 1})
    return meshpilot_argv([*kept, "-u", str(user.uid), "-g", str(user.gid)])
