"""AuthorizationPolicies with action CUSTOM → RBAC + ext_authz filter pairs, one pair per
provider in name order (Istio's builder). The RBAC filter only evaluates (shadow rules with
stat prefix `istio_ext_authz_`) and the ext_authz filter after it asks the authorizer only
when one of them matched. Dry-run CUSTOM policies are left out: they never call it.

A provider that cannot be resolved (ext_authz.py) denies what its policies match (policy
names end with `-deny-due-to-bad-CUSTOM-action`) and is logged: fail closed. On TCP chains
an HTTP provider adds nothing (Istio ignores it there); a gRPC one gets the network pair.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence

from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.config.rbac.v3 import rbac_pb2
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2 as http_rbac_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.rbac.v3 import rbac_pb2 as network_rbac_pb2

from meshpilot.config.istio.authorization_policy import AuthorizationPolicy
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.security.ext_authz import (
    SHADOW_STAT_PREFIX,
    ResolvedProvider,
    resolve_provider,
)
from meshpilot.xds.generate.security.rbac import (
    HTTP_RBAC,
    NETWORK_RBAC,
    TCP_STAT_PREFIX,
    bad_custom_rules,
    build_rbac,
)
from meshpilot.xds.protos import pack

__all__ = ["HTTP_EXT_AUTHZ", "custom_http_filters", "custom_network_filters", "resolve_custom"]

HTTP_EXT_AUTHZ = "envoy.filters.http.ext_authz"
NETWORK_EXT_AUTHZ = "envoy.filters.network.ext_authz"
_log = logging.getLogger(__name__)

_Policy = ConfigObject[AuthorizationPolicy]


def _provider_of(obj: _Policy) -> str:
    return obj.model.spec.provider.name if obj.model.spec.provider else ""


def resolve_custom(push: PushContext, custom: Iterable[_Policy]) -> tuple[ResolvedProvider, ...]:
    """The providers the CUSTOM policies name, resolved, in name order; unusable ones logged."""
    resolved = []
    for name in sorted({_provider_of(obj) for obj in custom}):
        provider = resolve_provider(push, name)
        if provider.error:
            _warn_once(provider.error)
        resolved.append(provider)
    return tuple(resolved)


@functools.lru_cache(maxsize=256)
def _warn_once(error: str) -> None:
    """Once per distinct problem, not once per proxy and push."""
    _log.warning("CUSTOM authorization denies what its policies match: %s", error)


def _by_provider(custom: Sequence[_Policy], name: str) -> list[_Policy]:
    return [obj for obj in custom if _provider_of(obj) == name]


def custom_http_filters(
    custom: Sequence[_Policy], providers: Sequence[ResolvedProvider], tds: Sequence[str]
) -> list[hcm_pb2.HttpFilter]:
    filters = []
    for provider in providers:
        built = build_rbac(
            _by_provider(custom, provider.name), rbac_pb2.RBAC.DENY, tcp=False, trust_domains=tds
        )
        if built is None:
            continue
        if provider.http is None:
            bad = bad_custom_rules(built)
            if bad is not None and bad.rules is not None:
                rbac = http_rbac_pb2.RBAC(rules=bad.rules)
                filters.append(hcm_pb2.HttpFilter(name=HTTP_RBAC, typed_config=pack(rbac)))
            continue
        rbac = http_rbac_pb2.RBAC(shadow_rules_stat_prefix=SHADOW_STAT_PREFIX)
        if built.rules is not None:
            rbac.shadow_rules.CopyFrom(built.rules)
        filters.append(hcm_pb2.HttpFilter(name=HTTP_RBAC, typed_config=pack(rbac)))
        filters.append(hcm_pb2.HttpFilter(name=HTTP_EXT_AUTHZ, typed_config=pack(provider.http)))
    return filters


def custom_network_filters(
    custom: Sequence[_Policy], providers: Sequence[ResolvedProvider], tds: Sequence[str]
) -> list[lc_pb2.Filter]:
    filters = []
    for provider in providers:
        if provider.http is not None and provider.network is None:
            continue  # an HTTP authorizer has nothing to say about TCP connections
        built = build_rbac(
            _by_provider(custom, provider.name), rbac_pb2.RBAC.DENY, tcp=True, trust_domains=tds
        )
        if built is None:
            continue
        if provider.network is None:
            bad = bad_custom_rules(built)
            if bad is not None and bad.rules is not None:
                rbac = network_rbac_pb2.RBAC(rules=bad.rules, stat_prefix=TCP_STAT_PREFIX)
                filters.append(lc_pb2.Filter(name=NETWORK_RBAC, typed_config=pack(rbac)))
            continue
        rbac = network_rbac_pb2.RBAC(
            stat_prefix=TCP_STAT_PREFIX, shadow_rules_stat_prefix=SHADOW_STAT_PREFIX
        )
        if built.rules is not None:
            rbac.shadow_rules.CopyFrom(built.rules)
        filters.append(lc_pb2.Filter(name=NETWORK_RBAC, typed_config=pack(rbac)))
        filters.append(lc_pb2.Filter(name=NETWORK_EXT_AUTHZ, typed_config=pack(provider.network)))
    return filters
