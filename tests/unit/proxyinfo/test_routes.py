"""`proxy-config routes`: one row per route, istioctl's domain and match wording."""

from __future__ import annotations

from typing import Any

import pytest

from meshpilot.proxyinfo import ConfigDump, RouteFilter, route_table, select_routes
from meshpilot.proxyinfo.route_text import describe_domains, describe_match
from meshpilot.proxyinfo.routes import SHORT_COLUMNS, VERBOSE_COLUMNS
from tests.unit.proxyinfo.dumps import INGRESS, SIDECAR, envoy_dump

GATEWAY_HTTPS = "https.443.https.bookinfo-gateway.default"
# What istiod puts in a sidecar's virtual host for reviews:9080, in its order.
REVIEWS_DOMAINS = [
    "reviews.default.svc.cluster.local", "reviews", "reviews.default.svc", "reviews.default",
    "10.96.0.12", "reviews.default.svc.cluster.local:9080", "10.96.0.12:9080",
]  # fmt: skip


def test_gateway_routes_one_row_per_route_with_its_virtual_service() -> None:
    table = route_table(envoy_dump(INGRESS), RouteFilter())
    assert table.columns == VERBOSE_COLUMNS
    rows = list(table.rows)
    vhost = ("bookinfo.example.com:80", "bookinfo.example.com")
    assert ("http.8080", *vhost, "/productpage", "bookinfo.default") in rows
    assert ("http.8080", *vhost, "/static*", "bookinfo.default") in rows
    https = [r for r in rows if r[0] == GATEWAY_HTTPS]
    assert {r[3] for r in https} == {
        "/productpage",
        "/static*",
        "/login",
        "/logout",
        "/api/v1/products*",
    }
    # The agent's static listeners' inline routes come last, without a name.
    assert rows[-2:] == [
        ("", "backend", "*", "/stats/prometheus*", ""),
        ("", "backend", "*", "/healthz/ready*", ""),
    ]


def test_sidecar_routes_sorted_by_port_and_without_passthrough() -> None:
    rows = list(route_table(envoy_dump(SIDECAR), RouteFilter()).rows)
    names = [r[0] for r in rows if r[0]]
    assert names == sorted(names, key=int) and set(names) == {"80", "9080"}
    details = (
        "details.default.svc.cluster.local:9080",
        "details, details.default + 1 more...",
        "/*",
        "",
    )
    assert ("9080", *details) in rows
    assert all(r[1] != "allow_any" for r in rows)  # PassthroughCluster routes are not shown


def test_name_filter_and_short_form() -> None:
    dump = envoy_dump(INGRESS)
    assert [r["name"] for r in select_routes(dump, RouteFilter("http.8080"))] == ["http.8080"]
    table = route_table(dump, RouteFilter(GATEWAY_HTTPS), verbose=False)
    assert table.columns == SHORT_COLUMNS and table.rows == ((GATEWAY_HTTPS, "1"),)


def test_virtual_host_without_routes_is_a_404() -> None:
    config: dict[str, Any] = {
        "name": "80",
        "virtual_hosts": [{"name": "blocked", "domains": ["*"]}],
    }
    dump = ConfigDump({"configs": [{
        "@type": "type.googleapis.com/envoy.admin.v3.RoutesConfigDump",
        "dynamic_route_configs": [{"route_config": config}],
    }]})  # fmt: skip
    assert route_table(dump, RouteFilter()).rows == (("80", "blocked", "*", "/*", "404"),)


@pytest.mark.parametrize(
    ("domains", "words"),
    [
        ([], ""),
        (["reviews.default.svc.cluster.local:9080"], "reviews.default.svc.cluster.local:9080"),
        (REVIEWS_DOMAINS, "reviews, reviews.default + 1 more..."),
        (["a.com", "b.com"], "a.com, b.com"),
        (["[fd00:10:96::7fc7]", "[fd00:10:96::7fc7]:80"], "[fd00:10:96::7fc7]"),
    ],
)  # fmt: skip
def test_domains_shortest_spellings_first_two(domains: list[str], words: str) -> None:
    assert describe_domains(domains) == words


@pytest.mark.parametrize(
    ("match", "words"),
    [
        ({"prefix": "/"}, "/*"),
        ({"path": "/login"}, "/login"),
        ({"path_separated_prefix": "/api"}, "PathPrefix:/api"),
        ({"safe_regex": {"regex": "^/v[0-9]"}}, "regex ^/v[0-9]"),
        ({"prefix": "/", "headers": [{"name": "end-user"}]}, "/*"),
    ],
)
def test_match_words(match: dict[str, Any], words: str) -> None:
    assert describe_match(match) == words
