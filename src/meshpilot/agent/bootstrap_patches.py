"""EnvoyFilter BOOTSTRAP patches: fetched from discovery and merged into the bootstrap the
agent writes before Envoy starts (xds/bootstrap_patches.py serves them).

The agent sends the Node it starts Envoy with, so the patches are chosen as the control
plane chooses every patch for that proxy. Each value is merged with protobuf's merge
semantics, in order (Istio's MERGE on the bootstrap). The patched bootstrap is checked by
`envoy --mode validate` first: if Envoy would reject it, the patches are left out, the
error (naming the EnvoyFilters and patch indexes) is logged, and Envoy starts with the
agent's own bootstrap. Discovery unreachable (or over TLS, which this plaintext call does
not speak): logged, and Envoy starts unpatched. A changed patch applies when the proxy
restarts, as in Istio.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import grpc
from envoy.config.bootstrap.v3 import bootstrap_pb2
from google.protobuf import json_format

from meshpilot.agent.options import AgentOptions
from meshpilot.errors import MeshpilotError

__all__ = ["FETCH_METHOD", "BootstrapPatch", "fetch_patches", "merged"]

log = logging.getLogger(__name__)

FETCH_METHOD = "/meshpilot.bootstrap.v1.BootstrapPatchService/Fetch"


@dataclass(frozen=True, slots=True)
class BootstrapPatch:
    filter: str  # namespace/name of the EnvoyFilter
    index: int  # in its configPatches
    value: bootstrap_pb2.Bootstrap

    @property
    def where(self) -> str:
        return f"EnvoyFilter {self.filter} configPatches[{self.index}]"


def _parse(body: bytes) -> list[BootstrapPatch]:
    data: Any = json.loads(body)
    out = []
    for item in data.get("patches", []):
        value = bootstrap_pb2.Bootstrap()
        json_format.ParseDict(item["value"], value)
        out.append(BootstrapPatch(str(item["filter"]), int(item["index"]), value))
    return out


async def fetch_patches(
    options: AgentOptions, node: bootstrap_pb2.Bootstrap, timeout: float = 3.0
) -> list[BootstrapPatch]:
    """The BOOTSTRAP patches for this proxy; [] (logged) when discovery cannot say."""
    if options.secure_xds:
        log.info("BOOTSTRAP patches are fetched over plaintext xDS only: none applied")
        return []
    request = node.node.SerializeToString()
    try:
        async with grpc.aio.insecure_channel(options.discovery_address) as channel:
            body = await channel.unary_unary(FETCH_METHOD)(request, timeout=timeout)
        return _parse(body)
    except grpc.aio.AioRpcError as exc:
        log.warning(
            "BOOTSTRAP patches not fetched from %s (%s: %s): Envoy starts without them",
            options.discovery_address,
            exc.code().name,
            exc.details(),
        )
    except (ValueError, KeyError, TypeError, json_format.ParseError) as exc:
        log.warning("BOOTSTRAP patches from %s unreadable: %s", options.discovery_address, exc)
    return []


def merged(boot: bootstrap_pb2.Bootstrap, patches: list[BootstrapPatch]) -> bootstrap_pb2.Bootstrap:
    """`boot` with every patch merged in order (a copy)."""
    out = bootstrap_pb2.Bootstrap()
    out.CopyFrom(boot)
    for patch in patches:
        out.MergeFrom(patch.value)
    return out


def checked(
    boot: bootstrap_pb2.Bootstrap, patches: list[BootstrapPatch]
) -> bootstrap_pb2.Bootstrap:
    """The patched bootstrap when Envoy accepts it, else `boot` (the rejection logged)."""
    if not patches:
        return boot
    from meshpilot.envoy.validate import validate_bootstrap

    patched = merged(boot, patches)
    try:
        validate_bootstrap(patched)
    except MeshpilotError as exc:
        names = ", ".join(p.where for p in patches)
        log.error("BOOTSTRAP patches left out (%s): %s", names, exc)
        return boot
    log.info("BOOTSTRAP patches applied: %s", ", ".join(p.where for p in patches))
    return patched


__all__ += ["checked"]
