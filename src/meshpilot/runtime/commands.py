"""Running host tools (ip, iptables, setpriv) with argument lists, never through a shell.

A failure raises `CommandError`, which names the command, its exit code and its stderr.
`require_host_support()` says up front, in one message, what this machine lacks for
network-namespace pods (root, iproute2, iptables, util-linux).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence

from meshpilot.errors import MeshpilotError

__all__ = [
    "CommandError",
    "HostSupportError",
    "in_netns",
    "require_host_support",
    "run",
]

DEFAULT_TIMEOUT = 30.0
REQUIRED_TOOLS = {
    "ip": "iproute2",
    "iptables": "iptables",
    "iptables-save": "iptables",
    "iptables-restore": "iptables",
    "setpriv": "util-linux",
}


class CommandError(MeshpilotError):
    """A host command could not be run or exited non-zero."""

    def __init__(self, argv: Sequence[str], returncode: int | None, stderr: str) -> None:
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stderr = stderr
        status = "could not run" if returncode is None else f"failed (exit {returncode})"
        detail = f": {stderr}" if stderr else ""
        super().__init__(f"`{shlex.join(self.argv)}` {status}{detail}")


class HostSupportError(MeshpilotError):
    """This machine cannot run network-namespace pods (not root, or tools missing)."""


def run(
    argv: Sequence[str],
    *,
    input_text: str | None = None,
    check: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` to completion and capture its output; raise `CommandError` on failure
    (unless `check=False`, then the caller reads `returncode`)."""
    args = list(argv)
    try:
        result = subprocess.run(
            args,
            input=input_text,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise CommandError(args, None, f"{args[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise CommandError(args, None, f"no answer within {timeout:g}s") from None
    if check and result.returncode != 0:
        raise CommandError(args, result.returncode, result.stderr.strip())
    return result


def in_netns(netns: str | None, argv: Sequence[str]) -> list[str]:
    """`argv` run inside a network namespace: a name from `ip netns` (with its /etc/netns
    files), or a path such as /proc/<pid>/ns/net or /var/run/netns/<name>; None: here."""
    if netns is None:
        return [*argv]
    if "/" in netns:
        return ["nsenter", f"--net={netns}", "--", *argv]
    return ["ip", "netns", "exec", netns, *argv]


def require_host_support() -> None:
    """Raise `HostSupportError` saying everything that is missing for netns pods."""
    problems = []
    if os.geteuid() != 0:
        problems.append("must run as root (network namespaces, veth links and iptables)")
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        packages = sorted({REQUIRED_TOOLS[tool] for tool in missing})
        problems.append(f"missing {', '.join(missing)} (Debian packages: {' '.join(packages)})")
    if problems:
        raise HostSupportError("cannot run network-namespace pods: " + "; ".join(problems))
