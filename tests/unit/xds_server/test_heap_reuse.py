"""The control plane's malloc policy (xds/grpc_service.py `map_large_buffers`): an ACK-sized
or route-config-sized buffer freed and allocated again reuses the heap instead of faulting
fresh pages in (B3: 1000 SotW EDS ACKs of 190 kB per endpoint push; gRPC's copy of a 2 MB
route config per proxy and VirtualService push)."""

from __future__ import annotations

import platform
import resource

import pytest

from meshpilot.xds.grpc_service import map_large_buffers

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")

HEAD, NONCE = b"\n\x16" + b"v" * 22, b"\x2a\x10" + b"n" * 16


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@pytest.mark.parametrize("size", [190_000, 2_100_000], ids=["ack", "route-config"])
def test_buffers_freed_are_reused_without_page_faults(size: int) -> None:
    assert map_large_buffers()
    parts = [HEAD, b"x" * size, NONCE]
    b"".join(parts)  # the first one may grow the heap
    before = _minor_faults()
    for _ in range(200):
        raw = b"".join(parts)
        del raw
    # Trimmed back to the OS (the ACK) or mapped and unmapped (the route config) after
    # each, every buffer faulted its pages in: 9000+ and 100,000+ here.
    assert _minor_faults() - before < 500
