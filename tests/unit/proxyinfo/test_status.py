"""`proxy-status`: syncz entries as the control plane writes them (xds/debug.py over real
Connection objects), summarised in istioctl's words, and the detail of one proxy."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from envoy.config.core.v3 import base_pb2

from meshpilot.errors import ProxyNotFoundError
from meshpilot.proxyinfo import ProxySync, find_proxy, sync_detail, sync_table
from meshpilot.proxyinfo.status import DETAIL_COLUMNS, SUMMARY_COLUMNS
from meshpilot.xds import debug
from meshpilot.xds.connection import Connection, WatchedResource
from meshpilot.xds.node import parse_node, proxy_for
from meshpilot.xds.protos import TypeUrl
from tests.conftest import REPO, push_from_paths

BASE = "http://127.0.0.1:15014"
PRODUCTPAGE = "productpage-v1-6b746f74dc-9stvs.default"
REVIEWS = "reviews-v1-545db77b95-2ps7q.default"


def _connection(pod_ref: str, **metadata: Any) -> Connection:
    _, push = push_from_paths([REPO / "examples" / "bookinfo"])
    namespace = pod_ref.partition(".")[2]
    node = base_pb2.Node(id=f"sidecar~10.0.0.1~{pod_ref}~{namespace}.svc.cluster.local")
    node.metadata.update({"NAMESPACE": namespace, "ISTIO_VERSION": "1.28.0", **metadata})
    info = parse_node(node)
    return Connection(info, proxy_for(push, info), push)


def _sent(conn: Connection, type_url: str, nonce: str, **fields: Any) -> None:
    conn.record_sent(type_url, "2026-06-01T00:00:00Z/7", nonce)
    conn.watched[type_url] = replace(conn.watched[type_url], **fields)


def _syncz() -> list[dict[str, Any]]:
    """productpage: everything ACKed but RDS (NACKed) and no EDS yet; reviews: CDS sent and
    never ACKed, LDS ACKed once and now stale."""
    page = _connection(PRODUCTPAGE)
    _sent(
        page,
        TypeUrl.CLUSTER,
        "c1",
        wildcard=True,
        nonce_acked="c1",
        version_acked="2026-06-01T00:00:00Z/7",
    )
    _sent(page, TypeUrl.LISTENER, "l1", wildcard=True, nonce_acked="l1")
    _sent(
        page,
        TypeUrl.ROUTE,
        "r2",
        names=frozenset({"9080", "80"}),
        nonce_acked="r1",
        nonce_nacked="r2",
        last_error="route: duplicate virtual host domain\nsecond line",
    )
    page.watched[TypeUrl.ENDPOINT] = WatchedResource(
        TypeUrl.ENDPOINT, frozenset({"outbound|9080||x"})
    )
    reviews = _connection(REVIEWS)
    _sent(reviews, TypeUrl.CLUSTER, "c9")
    _sent(reviews, TypeUrl.LISTENER, "l9", nonce_acked="l8")
    return json.loads(json.dumps(debug.syncz([reviews, page])))  # as served over HTTP


def _syncs() -> list[ProxySync]:
    return sorted((ProxySync.parse(e, "127.0.0.1:15014") for e in _syncz()), key=lambda s: s.proxy)


def test_summary_in_istioctl_words() -> None:
    table = sync_table(_syncs())
    assert table.columns == SUMMARY_COLUMNS
    end = ("NOT SENT", "127.0.0.1:15014", "1.28.0")
    never = "STALE (Never Acknowledged)"
    assert list(table.rows) == [
        (PRODUCTPAGE, "Kubernetes", "SYNCED", "SYNCED", "NOT SENT", "NACKED", *end),
        (REVIEWS, "Kubernetes", never, "STALE", "NOT SENT", "NOT SENT", *end),
    ]


def test_detail_shows_nonces_resources_and_the_nack_error() -> None:
    [page] = find_proxy(_syncs(), PRODUCTPAGE, BASE)
    text = sync_detail(page)
    assert text.startswith(f"Proxy {PRODUCTPAGE}, connection {page.connection_id}\n")
    assert f"\n  node id:      sidecar~10.0.0.1~{PRODUCTPAGE}~" in text
    assert "\n  stream:       sotw\n" in text
    table = text[text.index("TYPE") :].split("\n\n")[0].splitlines()
    assert table[0].split() == " ".join(DETAIL_COLUMNS).split()
    assert [line.split()[:2] for line in table[1:]] == [
        ["CDS", "SYNCED"],
        ["LDS", "SYNCED"],
        ["EDS", "NOT"],
        ["RDS", "NACKED"],
    ]
    assert table[4].split()[-2:] == ["r2", "2"]
    assert text.endswith(
        "NACK errors (last rejected response per type):\n"
        "  RDS nonce r2: route: duplicate virtual host domain\n    second line"
    )


def test_find_proxy_defaults_the_namespace_and_names_the_connected_ones() -> None:
    syncs = _syncs()
    assert [s.proxy for s in find_proxy(syncs, "productpage-v1-6b746f74dc-9stvs", BASE)] == [
        PRODUCTPAGE
    ]
    with pytest.raises(ProxyNotFoundError) as caught:
        find_proxy(syncs, "ratings.default", BASE)
    assert str(caught.value) == (
        f"unknown proxy ratings.default: not connected to the control plane at {BASE} "
        f"(connected: {PRODUCTPAGE}, {REVIEWS})"
    )
    with pytest.raises(ProxyNotFoundError, match="no proxy is connected"):
        find_proxy([], "ratings.default", BASE)


def test_older_syncz_with_only_istiods_flat_fields() -> None:
    entry = {
        "proxy": "a.default", "cluster_id": "east", "istio_version": "1.20.0",
        "cluster_sent": "n1", "cluster_acked": "n1", "listener_sent": "n2", "listener_acked": "n1",
        "control_plane": "istiod-abc",
    }  # fmt: skip
    sync = ProxySync.parse(entry, "ignored")
    assert sync_table([sync]).rows == (
        (
            "a.default",
            "east",
            "SYNCED",
            "STALE",
            "NOT SENT",
            "NOT SENT",
            "NOT SENT",
            "istiod-abc",
            "1.20.0",
        ),
    )
