"""Free ports come from below the ephemeral range (where client connections take their
source ports), are never handed out twice, and a taken preferred port is replaced."""

import socket
from pathlib import Path

from meshpilot.runtime.ports import free_port, free_ports


def _ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_ports_are_below_the_ephemeral_range_and_distinct() -> None:
    ports = free_ports(200)
    assert len(set(ports)) == 200
    assert all(20000 <= p < _ephemeral_low() for p in ports)


def test_a_port_handed_out_is_not_handed_out_again_even_as_preferred() -> None:
    first = free_port()
    assert free_port(first) != first


def test_a_taken_preferred_port_is_replaced_by_a_free_one() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = taken.getsockname()[1]
        port = free_port(busy)
    assert port != busy
    with socket.socket() as sock:  # the one given can be bound on every address
        sock.bind(("0.0.0.0", port))
