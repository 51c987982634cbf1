"""`proxy-status`: the control plane's `/debug/syncz`, as istioctl shows it (NAME, CLUSTER,
CDS, LDS, EDS, RDS, ECDS, ISTIOD, VERSION with SYNCED / NOT SENT / STALE / NACKED), and for
one proxy what was sent, ACKed and NACKed per type, with the NACK's error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from meshpilot.errors import ProxyNotFoundError
from meshpilot.proxyinfo.fetch import DEFAULT_TIMEOUT, FetchError, base_url, get_json
from meshpilot.proxyinfo.fields import JsonObject, obj, strings, text
from meshpilot.proxyinfo.table import Table

__all__ = ["ProxySync", "TypeSync", "find_proxy", "read_syncz", "sync_detail", "sync_table"]

SUMMARY_COLUMNS = ("NAME", "CLUSTER", "CDS", "LDS", "EDS", "RDS", "ECDS", "ISTIOD", "VERSION")
DETAIL_COLUMNS = (
    "TYPE", "STATUS", "VERSION SENT", "NONCE SENT", "VERSION ACKED", "NONCE ACKED",
    "NONCE NACKED", "RESOURCES",
)  # fmt: skip
TYPE_ORDER = ("cds", "lds", "eds", "rds", "sds", "ecds")
DEFAULT_CLUSTER = "Kubernetes"  # Istio's cluster id when none is configured
# syncz's flat istiod fields, per short type.
_FLAT = {"cds": "cluster", "lds": "listener", "eds": "endpoint", "rds": "route", "sds": "secret",
         "ecds": "extensionconfig"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class TypeSync:
    type: str  # cds, lds, eds, rds, sds
    status: str  # SYNCED, NOT SENT, STALE or NACKED
    version_sent: str = ""
    nonce_sent: str = ""
    version_acked: str = ""
    nonce_acked: str = ""
    nonce_nacked: str = ""
    last_error: str = ""
    resources: tuple[str, ...] = ()
    sent_at: str = ""
    acked_at: str = ""

    @classmethod
    def parse(cls, short: str, data: JsonObject) -> TypeSync:
        return cls(
            type=short,
            status=text(data, "status")
            or _flat_status(text(data, "nonce_sent"), text(data, "nonce_acked")),
            version_sent=text(data, "version_sent"),
            nonce_sent=text(data, "nonce_sent"),
            version_acked=text(data, "version_acked"),
            nonce_acked=text(data, "nonce_acked"),
            nonce_nacked=text(data, "nonce_nacked"),
            last_error=text(data, "last_error"),
            resources=tuple(strings(data, "resource_names")),
            sent_at=text(data, "sent_at"),
            acked_at=text(data, "acked_at"),
        )

    @property
    def shown(self) -> str:
        """istioctl's words: a STALE type never ACKed says so."""
        if self.status == "STALE" and not self.nonce_acked:
            return "STALE (Never Acknowledged)"
        return self.status


def _flat_status(sent: str, acked: str) -> str:
    if not sent:
        return "NOT SENT"
    return "SYNCED" if sent == acked else "STALE"


@dataclass(frozen=True, slots=True)
class ProxySync:
    proxy: str  # <pod>.<namespace>
    connection_id: str
    cluster_id: str
    control_plane: str
    istio_version: str
    types: Mapping[str, TypeSync] = field(default_factory=dict)
    details: Mapping[str, str] = field(default_factory=dict)  # node id, stream, peer...
    raw: JsonObject = field(default_factory=dict)  # the syncz entry, for -o json|yaml

    @classmethod
    def parse(cls, entry: JsonObject, control_plane: str) -> ProxySync:
        types = {short: TypeSync.parse(short, data) for short, data in obj(entry, "types").items()}
        for short, prefix in _FLAT.items():  # an older syncz: only istiod's flat fields
            if short not in types and text(entry, f"{prefix}_sent"):
                flat = {
                    "nonce_sent": text(entry, f"{prefix}_sent"),
                    "nonce_acked": text(entry, f"{prefix}_acked"),
                }
                types[short] = TypeSync.parse(short, flat)
        keys = ("node_id", "proxy_type", "stream", "peer", "connected_at", "push_version")
        return cls(
            proxy=text(entry, "proxy"),
            connection_id=text(entry, "connection_id"),
            cluster_id=text(entry, "cluster_id") or DEFAULT_CLUSTER,
            control_plane=text(entry, "control_plane") or control_plane,
            istio_version=text(entry, "istio_version"),
            types=types,
            details={k: text(entry, k) for k in keys if text(entry, k)},
            raw=entry,
        )

    def status(self, short: str) -> str:
        sync = self.types.get(short)
        return sync.shown if sync else "NOT SENT"

    def ordered_types(self) -> list[TypeSync]:
        rank = {t: i for i, t in enumerate(TYPE_ORDER)}
        return sorted(self.types.values(), key=lambda t: (rank.get(t.type, len(rank)), t.type))


def read_syncz(discovery: str, timeout: float = DEFAULT_TIMEOUT) -> list[ProxySync]:
    base = base_url(discovery)
    data: Any = get_json(base, "/debug/syncz", "the control plane", timeout)
    if not isinstance(data, list):
        raise FetchError(f"the control plane at {base} answered /debug/syncz with no list")
    control_plane = urlsplit(base).netloc
    entries = [ProxySync.parse(e, control_plane) for e in data if isinstance(e, dict)]
    return sorted(entries, key=lambda s: (s.cluster_id, s.proxy, s.connection_id))


def sync_table(syncs: Sequence[ProxySync]) -> Table:
    rows = (
        (s.proxy, s.cluster_id, *(s.status(t) for t in ("cds", "lds", "eds", "rds", "ecds")),
         s.control_plane, s.istio_version)
        for s in syncs
    )  # fmt: skip
    return Table.of(SUMMARY_COLUMNS, rows)


def find_proxy(syncs: Sequence[ProxySync], ref: str, base: str) -> list[ProxySync]:
    """The connections of proxy `ref` (<pod>.<namespace>; the namespace defaults to
    "default"); ProxyNotFoundError naming the connected ones otherwise."""
    for wanted in (ref, f"{ref}.default"):
        found = [s for s in syncs if s.proxy == wanted]
        if found:
            return found
    connected = sorted({s.proxy for s in syncs})
    known = f"connected: {', '.join(connected)}" if connected else "no proxy is connected"
    raise ProxyNotFoundError(
        f"unknown proxy {ref}: not connected to the control plane at {base} ({known})"
    )


def sync_detail(sync: ProxySync) -> str:
    """The per-type state of one connection, and the NACK errors in full."""
    labels = {k: k.replace("_", " ") + ":" for k in sync.details}
    width = max((len(label) for label in labels.values()), default=0)
    lines = [f"Proxy {sync.proxy}, connection {sync.connection_id}"]
    lines += [f"  {labels[k].ljust(width)} {v}" for k, v in sync.details.items()]
    lines.append("")
    rows = [_detail_row(t) for t in sync.ordered_types()]
    lines.append(Table.of(DETAIL_COLUMNS, rows).render())
    nacked = [t for t in sync.ordered_types() if t.last_error]
    if nacked:
        lines += ["", "NACK errors (last rejected response per type):"]
        for t in nacked:
            error = t.last_error.replace("\n", "\n    ")  # continuation lines indented
            lines.append(f"  {t.type.upper()} nonce {t.nonce_nacked}: {error}")
    return "\n".join(lines)


def _detail_row(sync: TypeSync) -> tuple[str, ...]:
    resources = "*" if sync.resources == ("*",) else str(len(sync.resources))
    return (
        sync.type.upper(), sync.shown, sync.version_sent or "-", sync.nonce_sent or "-",
        sync.version_acked or "-", sync.nonce_acked or "-", sync.nonce_nacked or "-", resources,
    )  # fmt: skip
