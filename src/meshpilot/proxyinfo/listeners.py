"""`proxy-config listeners`: istioctl's summary, one row per filter chain (ADDRESSES, PORT,
MATCH, DESTINATION), or one per listener without --verbose (ADDRESSES, PORT, TYPE); its
filters --address, --port and --type."""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.proxyinfo.dump import ConfigDump
from meshpilot.proxyinfo.fields import JsonObject, integer, obj, objs, text
from meshpilot.proxyinfo.listener_chains import (
    chain_destination,
    chain_match,
    filter_chains,
    listener_type,
)
from meshpilot.proxyinfo.table import Table

__all__ = ["ListenerFilter", "listener_table", "select_listeners"]

VERBOSE_COLUMNS = ("ADDRESSES", "PORT", "MATCH", "DESTINATION")
SHORT_COLUMNS = ("ADDRESSES", "PORT", "TYPE")
_PADDING = 1  # istioctl's listener table is tighter than the others


def _address(listener: JsonObject) -> str:
    address = obj(listener, "address")
    return text(address, "socket_address", "address") or text(address, "pipe", "path")


def _addresses(listener: JsonObject) -> list[str]:
    extra = objs(listener, "additional_addresses")
    return [_address(listener)] + [text(a, "address", "socket_address", "address") for a in extra]


def _port(listener: JsonObject) -> int:
    return integer(listener, "address", "socket_address", "port_value")


@dataclass(frozen=True, slots=True)
class ListenerFilter:
    address: str = ""
    port: int = 0
    type: str = ""  # HTTP, TCP, HTTP+TCP or UNKNOWN (any case)

    def matches(self, listener: JsonObject) -> bool:
        if self.address and self.address.lower() not in (a.lower() for a in _addresses(listener)):
            return False
        if self.port and _port(listener) != self.port:
            return False
        return not (self.type and listener_type(listener).lower() != self.type.lower())


def select_listeners(dump: ConfigDump, where: ListenerFilter) -> list[JsonObject]:
    """The matching listeners, sorted as istioctl sorts them (port, address, type)."""
    found = [lst for lst in dump.listeners() if where.matches(lst)]
    return sorted(found, key=lambda lst: (_port(lst), _address(lst), listener_type(lst)))


def _rows(listener: JsonObject, verbose: bool) -> list[tuple[str, ...]]:
    addresses, port = ",".join(_addresses(listener)), str(_port(listener))
    if not verbose:
        return [(addresses, port, listener_type(listener))]
    chains = [(chain_match(c), chain_destination(c)) for c in filter_chains(listener)]
    chains.sort(key=lambda chain: chain[1], reverse=True)  # istioctl: by destination, descending
    return [(addresses, port, match, destination) for match, destination in chains]


def listener_table(dump: ConfigDump, where: ListenerFilter, verbose: bool = True) -> Table:
    rows = [row for lst in select_listeners(dump, where) for row in _rows(lst, verbose)]
    return Table.of(VERBOSE_COLUMNS if verbose else SHORT_COLUMNS, rows, _PADDING)
