"""Free TCP ports for servers we start ourselves (demo loopback mode, tests).

A port the kernel hands out for `bind(port 0)` comes from the ephemeral range, the same
range outgoing connections take their source ports from: between choosing such a port and
the server binding it, any client connection on the machine may take it (a demo agent once
failed with 'address already in use' on exactly that). So ports are chosen below the
ephemeral range, where only explicit binds land, and never twice in one process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["NoFreePort", "free_port", "free_ports"]

_LOWEST = 20000  # above the well-known and registered ports the mesh itself uses (15xxx)
_ATTEMPTS = 2000
_handed_out: set[int] = set()
_choice = random.Random()


class NoFreePort(RuntimeError):
    """No port below the ephemeral range could be bound."""


def _ephemeral_low() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    """Whether a server could bind `port` on every address (as the servers bind:
    SO_REUSEADDR, so a closed connection's TIME_WAIT does not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def free_port(preferred: int = 0) -> int:
    """`preferred` if it is free, else a free port below the ephemeral range that this
    process has not handed out before."""
    if preferred and preferred not in _handed_out and _bindable(preferred):
        _handed_out.add(preferred)
        return preferred
    high = _ephemeral_low() - 1
    for _ in range(_ATTEMPTS):
        port = _choice.randint(_LOWEST, high)
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    raise NoFreePort(f"no free TCP port in {_LOWEST}-{high}")


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports."""
    return [free_port() for _ in range(count)]
