"""The DNS name table a sidecar's agent answers from: Istio's NDS `NameTable`, as data.

One entry per hostname the proxy can see (its Sidecar scope): the service's addresses, its
registry ("Kubernetes" or "External"), and for Kubernetes services the short name and
namespace, from which the agent answers `name`, `name.ns` and `name.ns.svc` too.

With DNS auto-allocation (ISTIO_META_DNS_AUTO_ALLOCATE) a ServiceEntry host without
addresses gets one from 240.240.0.0/16 (IPv6: 2001:2::f0f0:0/112), as Istio allocates
them, so that an application can resolve it; wildcard hosts and resolution NONE (whose
original destination must stay the real one) get none.

Pure: `build_name_table` reads services, the JSON form crosses the wire to the agent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Any

from meshpilot.errors import MeshpilotError
from meshpilot.registry.model import Resolution, Service

__all__ = [
    "AUTO_ALLOCATE_V4",
    "AUTO_ALLOCATE_V6",
    "NameInfo",
    "NameTableError",
    "build_name_table",
    "name_table_from_json",
    "name_table_json",
]

AUTO_ALLOCATE_V4 = IPv4Address("240.240.0.0")  # /16
AUTO_ALLOCATE_V6 = IPv6Address("2001:2::f0f0:0")  # /112
_SLOTS = 1 << 16
KUBERNETES, EXTERNAL = "Kubernetes", "External"


class NameTableError(MeshpilotError):
    """A name table that is not the JSON form `name_table_json` writes."""


@dataclass(frozen=True, slots=True)
class NameInfo:
    ips: tuple[str, ...]
    registry: str = EXTERNAL
    shortname: str = ""  # Kubernetes services only
    namespace: str = ""


def build_name_table(services: Iterable[Service], *, auto_allocate: bool) -> dict[str, NameInfo]:
    """hostname → NameInfo for these (visible) services, sorted by hostname."""
    visible = sorted(services, key=lambda s: (s.hostname, s.namespace))
    allocated = _allocate(visible) if auto_allocate else {}
    table: dict[str, NameInfo] = {}
    for svc in visible:
        if svc.hostname.startswith("*") or svc.hostname in table or svc.is_alias:
            continue
        ips = tuple(a for a in svc.addresses if _concrete(a)) or allocated.get(svc.hostname, ())
        if not ips:
            continue
        if svc.is_kubernetes:
            table[svc.hostname] = NameInfo(ips, KUBERNETES, svc.kube_name, svc.namespace)
        else:
            table[svc.hostname] = NameInfo(ips, EXTERNAL)
    return table


def _concrete(address: str) -> bool:
    """A single address to answer with (not 0.0.0.0, not a CIDR range)."""
    try:
        return not ip_address(address).is_unspecified
    except ValueError:
        return False


def _allocate(services: list[Service]) -> dict[str, tuple[str, ...]]:
    """VIPs for ServiceEntry hosts that have none: a slot chosen by a hash of the host,
    the next free one on a collision (hosts taken in sorted order: stable across pushes of
    the same config); slots whose last byte would be .0 or .255 are skipped."""
    wanting = [
        s
        for s in services
        if not s.is_kubernetes
        and not s.hostname.startswith("*")
        and s.resolution is not Resolution.PASSTHROUGH
        and not any(_concrete(a) for a in s.addresses)
    ]
    taken: set[int] = set()
    out: dict[str, tuple[str, ...]] = {}
    for svc in wanting:
        if svc.hostname in out:
            continue
        slot = _fnv1a(f"{svc.namespace}/{svc.hostname}") % _SLOTS
        for _ in range(_SLOTS):
            if slot not in taken and slot & 0xFF not in (0, 0xFF):
                break
            slot = (slot + 1) % _SLOTS
        else:
            break  # the range is full: later hosts go without
        taken.add(slot)
        out[svc.hostname] = (str(AUTO_ALLOCATE_V4 + slot), str(AUTO_ALLOCATE_V6 + slot))
    return out


def _fnv1a(text: str) -> int:
    value = 0x811C9DC5
    for byte in text.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def name_table_json(table: Mapping[str, NameInfo]) -> dict[str, Any]:
    """NDS's NameTable as JSON (field names as in istio.networking.nds.v1)."""
    return {
        "table": {
            host: {
                "ips": list(info.ips),
                "registry": info.registry,
                **({"shortname": info.shortname} if info.shortname else {}),
                **({"namespace": info.namespace} if info.namespace else {}),
            }
            for host, info in table.items()
        }
    }


def name_table_from_json(data: Any) -> dict[str, NameInfo]:
    if not isinstance(data, dict) or not isinstance(data.get("table"), dict):
        raise NameTableError("name table: expected an object with a 'table' object")
    table: dict[str, NameInfo] = {}
    for host, info in data["table"].items():
        ips = info.get("ips") if isinstance(info, dict) else None
        if not isinstance(ips, list) or not all(isinstance(ip, str) for ip in ips):
            raise NameTableError(f"name table: {host!r} has no list of IPs")
        table[host.lower()] = NameInfo(
            tuple(ips),
            str(info.get("registry", EXTERNAL)),
            str(info.get("shortname", "")),
            str(info.get("namespace", "")),
        )
    return table
