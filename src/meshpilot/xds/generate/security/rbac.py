"""AuthorizationPolicies of a workload → Envoy RBAC filters (Istio's authz builder).

One RBAC filter per action, in Istio's order: CUSTOM, AUDIT (Envoy action LOG), DENY,
ALLOW. HTTP chains get `envoy.filters.http.rbac` inside the HCM; TCP chains get
`envoy.filters.network.rbac` (stat prefix `tcp.`) before tcp_proxy. Each rule is one RBAC
policy named `ns[<ns>]-policy[<name>]-rule[<i>]`; a policy without rules gets one policy
that never matches, so ALLOW with no rules denies everything. Policies annotated
`istio.io/dry-run: "true"` go to shadow rules (stats `istio_dry_run_allow_` / `_deny_`,
set as Istio sets them: see RbacRules.shadow_stat_prefix).

CUSTOM policies become RBAC + ext_authz pairs (custom.py), placed by the caller before the
AUDIT filter; a provider that cannot be used denies what its policies match (policy names
end with `-deny-due-to-bad-CUSTOM-action`), as Istio does.

An invalid policy with no last good version (config/fail_closed.py) gets an RBAC filter of
its own, first: DENY everything, policy `ns[<ns>]-policy[<name>]-invalid-deny-all`, stats
`http.<hcm>.rbac.invalid_policy_<ns>_<name>.denied` (`rules_stat_prefix`) and on TCP
`tcp.invalid_policy_<ns>_<name>.rbac.denied`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.config.rbac.v3 import rbac_pb2
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2 as http_rbac_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.rbac.v3 import rbac_pb2 as network_rbac_pb2

from meshpilot.config.istio.authorization_policy import AuthorizationPolicy
from meshpilot.config.objects import ConfigObject
from meshpilot.model.indexes.authz import WorkloadSecurity
from meshpilot.xds.generate.security.rules import MATCH_NEVER, rule_policy
from meshpilot.xds.generate.security.trust_domain import DEFAULT_TRUST_DOMAIN
from meshpilot.xds.protos import pack

__all__ = [
    "HTTP_RBAC",
    "NETWORK_RBAC",
    "TCP_STAT_PREFIX",
    "RbacRules",
    "bad_custom_rules",
    "build_rbac",
    "http_rbac_filters",
    "invalid_policy_rules",
    "invalid_stat_prefix",
    "network_rbac_filters",
]

HTTP_RBAC = "envoy.filters.http.rbac"
NETWORK_RBAC = "envoy.filters.network.rbac"
TCP_STAT_PREFIX = "tcp."
_SHADOW_PREFIX = {
    rbac_pb2.RBAC.ALLOW: "istio_dry_run_allow_",
    rbac_pb2.RBAC.DENY: "istio_dry_run_deny_",
}
_EXT_AUTHZ_PREFIX = "istio-ext-authz"
_BAD_CUSTOM_SUFFIX = "-deny-due-to-bad-CUSTOM-action"
_INVALID_SUFFIX = "-invalid-deny-all"

_Policy = ConfigObject[AuthorizationPolicy]


@dataclass(frozen=True, slots=True)
class RbacRules:
    """The enforced and the dry-run (shadow) rules of one action; either may be None."""

    rules: rbac_pb2.RBAC | None
    shadow: rbac_pb2.RBAC | None
    bad_custom: bool = False

    @property
    def shadow_stat_prefix(self) -> str:
        """As Istio's shadowRuleStatPrefix, which reads the action of absent shadow rules as
        ALLOW (Go's zero value): `istio_dry_run_allow_` also on filters without dry-run
        policies; none on AUDIT with dry-run policies or on the bad-CUSTOM deny filter."""
        if self.bad_custom:
            return ""
        action = self.shadow.action if self.shadow is not None else rbac_pb2.RBAC.ALLOW
        return _SHADOW_PREFIX.get(action, "")


def policy_name(namespace: str, name: str, rule: int, provider: str | None = None) -> str:
    prefix = f"{_EXT_AUTHZ_PREFIX}-{provider}-" if provider is not None else ""
    return f"{prefix}ns[{namespace}]-policy[{name}]-rule[{rule}]"


def build_rbac(
    policies: Sequence[_Policy],
    action: rbac_pb2.RBAC.Action.ValueType,
    *,
    tcp: bool,
    trust_domains: Sequence[str] = (DEFAULT_TRUST_DOMAIN,),
) -> RbacRules | None:
    """Istio's builder.build: every rule of every policy, enforced or shadow."""
    if not policies:
        return None
    enforce = rbac_pb2.RBAC(action=action)
    shadow = rbac_pb2.RBAC(action=action)
    has_enforce = has_shadow = False
    allow = action == rbac_pb2.RBAC.ALLOW
    for obj in policies:
        target = shadow if obj.model.dry_run else enforce
        has_shadow |= obj.model.dry_run
        has_enforce |= not obj.model.dry_run
        spec = obj.model.spec
        provider = spec.provider.name if spec.action == "CUSTOM" and spec.provider else None
        for index, rule in enumerate(spec.rules):
            if rule is None:
                continue
            generated = rule_policy(
                rule, obj.namespace, tcp=tcp, allow=allow, trust_domains=trust_domains
            )
            if generated is not None:
                target.policies[policy_name(obj.namespace, obj.name, index, provider)].CopyFrom(
                    generated
                )
        if not spec.rules:
            target.policies[policy_name(obj.namespace, obj.name, 0, provider)].CopyFrom(MATCH_NEVER)
    return RbacRules(enforce if has_enforce else None, shadow if has_shadow else None)


def bad_custom_rules(rules: RbacRules | None) -> RbacRules | None:
    """CUSTOM with no usable provider: deny what the (enforced) rules match."""
    if rules is None or rules.rules is None:
        return None
    deny = rbac_pb2.RBAC(action=rbac_pb2.RBAC.DENY)
    for name, policy in rules.rules.policies.items():
        deny.policies[name + _BAD_CUSTOM_SUFFIX].CopyFrom(policy)
    return RbacRules(deny, None, bad_custom=True)


def _actions(security: WorkloadSecurity, tcp: bool, tds: Sequence[str]) -> list[RbacRules]:
    built = [
        build_rbac(security.audit, rbac_pb2.RBAC.LOG, tcp=tcp, trust_domains=tds),
        build_rbac(security.deny, rbac_pb2.RBAC.DENY, tcp=tcp, trust_domains=tds),
        build_rbac(security.allow, rbac_pb2.RBAC.ALLOW, tcp=tcp, trust_domains=tds),
    ]
    return [b for b in built if b is not None]


def invalid_policy_rules(obj: _Policy) -> rbac_pb2.RBAC:
    """A stand-in for an invalid policy (config/fail_closed.py): deny every request."""
    deny = rbac_pb2.RBAC(action=rbac_pb2.RBAC.DENY)
    deny.policies[f"ns[{obj.namespace}]-policy[{obj.name}]{_INVALID_SUFFIX}"].CopyFrom(
        rbac_pb2.Policy(
            permissions=[rbac_pb2.Permission(any=True)], principals=[rbac_pb2.Principal(any=True)]
        )
    )
    return deny


def invalid_stat_prefix(obj: _Policy) -> str:
    """`invalid_policy_<ns>_<name>`: the RBAC stats of the stand-in say why it denies."""
    return f"invalid_policy_{obj.namespace}_{obj.name}".replace(".", "_")


def http_rbac_filters(
    security: WorkloadSecurity,
    trust_domains: Sequence[str] = (DEFAULT_TRUST_DOMAIN,),
    custom: Sequence[hcm_pb2.HttpFilter] = (),
) -> list[hcm_pb2.HttpFilter]:
    """The invalid policies' deny filters, then `custom` (custom.py), AUDIT, DENY, ALLOW."""
    filters = [
        hcm_pb2.HttpFilter(
            name=HTTP_RBAC,
            typed_config=pack(
                http_rbac_pb2.RBAC(
                    rules=invalid_policy_rules(obj), rules_stat_prefix=invalid_stat_prefix(obj)
                )
            ),
        )
        for obj in security.invalid
    ]
    filters.extend(custom)
    for built in _actions(security, False, trust_domains):
        config = http_rbac_pb2.RBAC(shadow_rules_stat_prefix=built.shadow_stat_prefix)
        if built.rules is not None:
            config.rules.CopyFrom(built.rules)
        if built.shadow is not None:
            config.shadow_rules.CopyFrom(built.shadow)
        filters.append(hcm_pb2.HttpFilter(name=HTTP_RBAC, typed_config=pack(config)))
    return filters


def network_rbac_filters(
    security: WorkloadSecurity,
    trust_domains: Sequence[str] = (DEFAULT_TRUST_DOMAIN,),
    custom: Sequence[lc_pb2.Filter] = (),
) -> list[lc_pb2.Filter]:
    filters = [
        lc_pb2.Filter(
            name=NETWORK_RBAC,
            typed_config=pack(
                network_rbac_pb2.RBAC(
                    rules=invalid_policy_rules(obj),
                    stat_prefix=f"{TCP_STAT_PREFIX}{invalid_stat_prefix(obj)}.",
                )
            ),
        )
        for obj in security.invalid
    ]
    filters.extend(custom)
    for built in _actions(security, True, trust_domains):
        config = network_rbac_pb2.RBAC(
            stat_prefix=TCP_STAT_PREFIX, shadow_rules_stat_prefix=built.shadow_stat_prefix
        )
        if built.rules is not None:
            config.rules.CopyFrom(built.rules)
        if built.shadow is not None:
            config.shadow_rules.CopyFrom(built.shadow)
        filters.append(lc_pb2.Filter(name=NETWORK_RBAC, typed_config=pack(config)))
    return filters
