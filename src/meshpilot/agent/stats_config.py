"""The bootstrap's `stats_config`: Istio's stat tags and its default stats inclusion list.

Istio keeps Envoy's stats small: only lifecycle stats (server, cluster_manager,
listener_manager, the xds-grpc cluster) and RBAC results are created unless the proxy asks
for more (`proxyStatsMatcher.inclusionPrefixes` / `inclusionRegexps`, here the agent's
`--stats-inclusion-prefix` / `--stats-inclusion-regexp`). The tag regexes turn Envoy's dotted
stat names into the Prometheus labels Istio users know (cluster_name, response_code, ...).
"""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.metrics.v3 import stats_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from google.protobuf import wrappers_pb2

__all__ = ["stats_config"]

# Envoy `{hex or dotted address}` listener/HCM prefixes, as Istio's template spells them.
_ADDRESS = r"(((?:[_.[:digit:]]*|[_\[\]aAbBcCdDeEfF[:digit:]]*))\.)"

_TAGS: tuple[tuple[str, str], ...] = (
    ("cluster_name", r"^cluster\.((.+?(\..+?\.svc\.cluster\.local)?)\.)"),
    ("tcp_prefix", r"^tcp\.((.*?)\.)\w+?$"),
    ("response_code", r"_rq(_(\d{3}))$"),
    ("response_code_class", r"_rq(_(\dxx))$"),
    ("http_conn_manager_listener_prefix", r"^listener(?=\.).*?\.http\." + _ADDRESS),
    ("http_conn_manager_prefix", r"^http\." + _ADDRESS),
    ("listener_address", r"^listener\." + _ADDRESS),
    ("mongo_prefix", r"^mongo\.(.+?)\.(collection|cmd|cx_|op_|delays_|decoding_)(.*?)$"),
    ("cache", r"(cache\.(.+?)\.)"),
    ("component", r"(component\.(.+?)\.)"),
    ("tag", r"(tag\.(.+?);\.)"),
    ("wasm_filter", r"(wasm_filter\.(.+?)\.)"),
    ("authz_enforce_result", r"rbac(\.(allowed|denied))"),
    ("authz_dry_run_action", r"(\.istio_dry_run_(allow|deny)_)"),
    ("authz_dry_run_result", r"(\.shadow_(allowed|denied))"),
)

# Lifecycle signals kept whatever the proxy asks for (the agent's readiness probe reads
# server.*, cluster_manager.cds.* and listener_manager.lds.*).
_PREFIXES = (
    "reporter=",
    "cluster_manager",
    "listener_manager",
    "server",
    "cluster.xds-grpc",
    "wasm",
)
_SUFFIXES = ("rbac.allowed", "rbac.denied", "shadow_allowed", "shadow_denied")
_REGEXPS = (r"vhost\..*\.route\..*",)
_TRAILING_PREFIXES = ("component", "istio")


def stats_config(
    extra_prefixes: Sequence[str] = (), extra_regexps: Sequence[str] = ()
) -> stats_pb2.StatsConfig:
    patterns = [string_pb2.StringMatcher(prefix=p) for p in (*_PREFIXES, *extra_prefixes)]
    patterns += [string_pb2.StringMatcher(suffix=s) for s in _SUFFIXES]
    patterns += [
        string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=r))
        for r in (*_REGEXPS, *extra_regexps)
    ]
    patterns += [string_pb2.StringMatcher(prefix=p) for p in _TRAILING_PREFIXES]
    return stats_pb2.StatsConfig(
        use_all_default_tags=wrappers_pb2.BoolValue(value=False),
        stats_tags=[stats_pb2.TagSpecifier(tag_name=n, regex=r) for n, r in _TAGS],
        stats_matcher=stats_pb2.StatsMatcher(
            inclusion_list=string_pb2.ListStringMatcher(patterns=patterns)
        ),
    )
