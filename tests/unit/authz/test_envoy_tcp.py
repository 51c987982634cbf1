"""Network RBAC on a TCP chain, through a real Envoy and tcp_proxy: a connection the policy
allows reaches the echo server, a denied one is closed. HTTP-only fields follow Istio's
TCP rule: an ALLOW rule using them is dropped (nothing allowed), a DENY rule ignores them
(denying more)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from meshpilot.model.indexes.authz import workload_security
from meshpilot.xds.generate.security.rbac import network_rbac_filters
from tests.unit.authz.envoy_harness import running_tcp_envoy, tcp_echo_server
from tests.unit.authz.helpers import push_of


@pytest.fixture(scope="module")
def upstream() -> Iterator[int]:
    with tcp_echo_server() as port:
        yield port


def _echo(port: int) -> bytes:
    """What comes back for one line; b"" when Envoy closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        try:
            conn.sendall(b"hello\n")
            return conn.recv(64)
        except ConnectionResetError:
            return b""


def _policy(action: str, rule: str) -> str:
    return (
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\n"
        f"metadata: {{name: p, namespace: foo}}\nspec: {{action: {action}, rules: [{rule}]}}\n"
    )


CASES = [
    ("ALLOW", "{from: [{source: {ipBlocks: [127.0.0.1]}}]}", True),
    ("ALLOW", "{from: [{source: {ipBlocks: [10.0.0.0/8]}}]}", False),
    ("ALLOW", "{to: [{operation: {methods: [GET]}}]}", False),  # rule dropped on TCP
    ("DENY", "{to: [{operation: {paths: [/admin]}}]}", False),  # field ignored: deny all
    (
        "DENY",
        "{from: [{source: {ipBlocks: [10.0.0.0/8]}}], to: [{operation: {methods: [GET]}}]}",
        True,
    ),
    ("DENY", "{from: [{source: {notIpBlocks: [127.0.0.0/8]}}]}", True),
    ("AUDIT", "{}", True),  # logs, never blocks
]


@pytest.mark.envoy
@pytest.mark.parametrize(("action", "rule", "connects"), CASES)
def test_connection_outcome(upstream: int, action: str, rule: str, connects: bool) -> None:
    push = push_of(_policy(action, rule))
    filters = network_rbac_filters(workload_security(push, "foo", {}))
    with running_tcp_envoy(filters, upstream) as port:
        assert _echo(port) == (b"hello\n" if connects else b"")
