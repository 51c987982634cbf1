"""One AuthorizationPolicy rule → one Envoy RBAC policy (Istio's authz model.Generate).

A rule becomes `permissions` (one per `to`, or one for any operation) and `principals`
(one per `from`, or one for any source). Each is an AND of its fields, in Istio's order:
operation fields (hosts, methods, paths, ports) or source fields (principals, trust
domains, service accounts, request principals, namespaces, remote IPs, IPs), then the `when`
conditions. A field is an OR of its values, and `not*` values become NOT(OR(...)).

On a TCP chain an HTTP-only field (hosts, methods, paths, request principals, headers,
claims) cannot be evaluated. ALLOW drops the whole rule, making the allow narrower; DENY
and AUDIT drop only that field, making the rule wider (Istio's "ignored on TCP").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envoy.config.rbac.v3 import rbac_pb2
from envoy.config.rbac.v3.rbac_pb2 import Permission, Principal

from meshpilot.config.istio.authorization_policy import Condition, Operation, Rule, Source
from meshpilot.xds.generate.security.attributes import (
    Attribute,
    HttpOnly,
    attribute_for,
    principal_and,
    principal_or,
)
from meshpilot.xds.generate.security.trust_domain import (
    DEFAULT_TRUST_DOMAIN,
    expand_trust_domains,
    with_trust_domain_aliases,
)

__all__ = ["MATCH_NEVER", "RuleField", "rule_fields", "rule_policy"]


# Istio's rbacPolicyMatchNever: the policy of an ALLOW/DENY with no rules at all.
MATCH_NEVER = rbac_pb2.Policy(
    permissions=[Permission(not_rule=Permission(any=True))],
    principals=[Principal(not_id=Principal(any=True))],
)

# Field → attribute key, in Istio's order inside a source and an operation.
_SOURCE_FIELDS = (
    ("principals", "not_principals", "source.principal"),
    ("trust_domains", "not_trust_domains", "source.trustDomain"),
    ("service_accounts", "not_service_accounts", "source.serviceAccount"),
    ("request_principals", "not_request_principals", "request.auth.principal"),
    ("namespaces", "not_namespaces", "source.namespace"),
    ("remote_ip_blocks", "not_remote_ip_blocks", "remote.ip"),
    ("ip_blocks", "not_ip_blocks", "source.ip"),
)
_OPERATION_FIELDS = (
    ("hosts", "not_hosts", "hosts"),
    ("methods", "not_methods", "methods"),
    ("paths", "not_paths", "paths"),
    ("ports", "not_ports", "ports"),
)


@dataclass(frozen=True, slots=True)
class RuleField:
    key: str
    values: tuple[str, ...]
    not_values: tuple[str, ...]
    attribute: Attribute


def _field(
    key: str,
    values: Sequence[str] | None,
    not_values: Sequence[str] | None,
    namespace: str,
    trust_domains: Sequence[str] = (DEFAULT_TRUST_DOMAIN,),
) -> RuleField | None:
    attribute = attribute_for(key, namespace)
    if attribute is None or not (values or not_values):
        return None
    if key == "source.principal":  # Istio's MigrateTrustDomain
        values = with_trust_domain_aliases(values or (), trust_domains)
        not_values = with_trust_domain_aliases(not_values or (), trust_domains)
    elif key == "source.trustDomain":  # Istio's ExpandTrustDomainAliases
        values = expand_trust_domains(values or (), trust_domains)
        not_values = expand_trust_domains(not_values or (), trust_domains)
    return RuleField(key, tuple(values or ()), tuple(not_values or ()), attribute)


TrustDomains = Sequence[str]
_LOCAL: TrustDomains = (DEFAULT_TRUST_DOMAIN,)


def _source_fields(src: Source | None, namespace: str, tds: TrustDomains) -> list[RuleField]:
    if src is None:
        return []
    found = (
        _field(k, getattr(src, v), getattr(src, n), namespace, tds) for v, n, k in _SOURCE_FIELDS
    )
    return [f for f in found if f is not None]


def _operation_fields(op: Operation | None) -> list[RuleField]:
    if op is None:
        return []
    found = (_field(k, getattr(op, v), getattr(op, n), "") for v, n, k in _OPERATION_FIELDS)
    return [f for f in found if f is not None]


def rule_fields(
    rule: Rule, namespace: str, trust_domains: TrustDomains = _LOCAL
) -> tuple[list[list[RuleField]], list[list[RuleField]]]:
    """(permission field lists, principal field lists) of a rule, as Istio's model.New."""
    conditions = [_condition(c, namespace, trust_domains) for c in rule.when or ()]
    when = [f for f in conditions if f is not None]
    base_permission = [f for f in when if f.attribute.is_permission]
    base_principal = [f for f in when if not f.attribute.is_permission]
    principals = [
        _source_fields(rf.source if rf else None, namespace, trust_domains) + base_principal
        for rf in rule.from_ or ()
    ] or [base_principal]
    permissions = [
        _operation_fields(rt.operation if rt else None) + base_permission for rt in rule.to or ()
    ] or [base_permission]
    return permissions, principals


def _condition(cond: Condition, namespace: str, tds: TrustDomains) -> RuleField | None:
    return _field(cond.key, cond.values, cond.not_values, namespace, tds)


def _permission_set(fields: list[RuleField], tcp: bool, strict: bool) -> Permission:
    rules: list[Permission] = []
    for f in fields:
        if tcp and f.attribute.http_only:
            if strict:
                raise HttpOnly(f.key)
            continue
        group = f.attribute.permission_group
        if group is not None:  # one matcher for all values (Istio's extendedPermission)
            if f.values:
                rules.append(group(f.key, f.values))
            if f.not_values:
                rules.append(Permission(not_rule=group(f.key, f.not_values)))
            continue
        build = f.attribute.permission
        assert build is not None
        if f.values:
            rules.append(
                Permission(or_rules=Permission.Set(rules=[build(f.key, v) for v in f.values]))
            )
        if f.not_values:
            ors = Permission(or_rules=Permission.Set(rules=[build(f.key, v) for v in f.not_values]))
            rules.append(Permission(not_rule=ors))
    return Permission(and_rules=Permission.Set(rules=rules or [Permission(any=True)]))


def _principal_values(f: RuleField, values: Sequence[str]) -> Principal:
    if f.attribute.group is not None:
        return f.attribute.group(f.key, values)
    build = f.attribute.principal
    assert build is not None
    return principal_or([build(f.key, v) for v in values])


def _principal_set(fields: list[RuleField], tcp: bool, strict: bool) -> Principal:
    ids: list[Principal] = []
    for f in fields:
        if tcp and f.attribute.http_only:
            if strict:
                raise HttpOnly(f.key)
            continue
        if f.values:
            ids.append(_principal_values(f, f.values))
        if f.not_values:
            ids.append(Principal(not_id=_principal_values(f, f.not_values)))
    return principal_and(ids or [Principal(any=True)])


def rule_policy(
    rule: Rule,
    namespace: str,
    *,
    tcp: bool,
    allow: bool,
    trust_domains: TrustDomains = _LOCAL,
) -> rbac_pb2.Policy | None:
    """The RBAC policy of one rule; None when an ALLOW rule cannot apply to TCP."""
    permissions, principals = rule_fields(rule, namespace, trust_domains)
    try:
        return rbac_pb2.Policy(
            permissions=[_permission_set(p, tcp, allow) for p in permissions],
            principals=[_principal_set(p, tcp, allow) for p in principals],
        )
    except HttpOnly:
        return None
