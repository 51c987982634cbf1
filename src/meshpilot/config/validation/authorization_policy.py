"""AuthorizationPolicy: action, provider, rules, sources, operations and conditions (Istio's
ValidateAuthorizationPolicy and security.ValidateAttribute)."""

from __future__ import annotations

from collections.abc import Sequence

from meshpilot.config.istio.authorization_policy import (
    DRY_RUN_ANNOTATION,
    DRY_RUN_VALUES,
    Action,
    AuthorizationPolicy,
    Condition,
    Operation,
    Rule,
    Source,
)
from meshpilot.config.validation.common import (
    Path,
    Problems,
    check_enum,
    check_selector,
    ip_or_cidr_error,
    quoted,
)
from meshpilot.config.validation.target_refs import SERVICE_ENTRY_TOO, check_target_refs

__all__ = ["CLAIMS_KEY", "ENVOY_FILTER_KEY", "HEADER_KEY", "validate_authorization_policy"]

SPEC: Path = ("spec",)
_ACTIONS = tuple(a.value for a in Action)
HEADER_KEY = "request.headers"
CLAIMS_KEY = "request.auth.claims"
ENVOY_FILTER_KEY = "experimental.envoy.filters."
# `when` keys and what their values must be ("ip", "port" or any string).
_PLAIN_KEYS = {
    "source.ip": "ip",
    "remote.ip": "ip",
    "source.namespace": "",
    "source.principal": "",
    "request.auth.principal": "",
    "request.auth.audiences": "",
    "request.auth.presenter": "",
    "destination.ip": "ip",
    "destination.port": "port",
    "connection.sni": "",
}
# Istio rejects these with CUSTOM: its ext_authz filter cannot see them.
_CUSTOM_UNSUPPORTED_KEYS = ("source.namespace", "source.principal")


def validate_authorization_policy(policy: AuthorizationPolicy, p: Problems) -> None:
    spec = policy.spec
    if spec.selector is not None:
        if spec.has_target_refs:
            p.error((*SPEC, "selector"), "only one of targetRefs or selector can be set")
        check_selector(p, (*SPEC, "selector", "matchLabels"), spec.selector.match_labels, "policy")
    check_target_refs(p, spec.target_ref, spec.target_refs, SERVICE_ENTRY_TOO)
    check_enum(p, (*SPEC, "action"), spec.action, _ACTIONS)
    dry_run = policy.metadata.annotations.get(DRY_RUN_ANNOTATION)
    if dry_run is not None and dry_run not in DRY_RUN_VALUES:
        p.warning(
            ("metadata", "annotations", DRY_RUN_ANNOTATION),
            f"{DRY_RUN_ANNOTATION}: {quoted(dry_run)} is not a boolean; the policy is enforced",
        )
    _check_action(policy, p)
    for index, rule in enumerate(spec.rules):
        path = (*SPEC, "rules", index)
        if rule is None:
            p.error(path, "`rule` must not be null")
            continue
        _check_rule(p, path, rule)


def _check_action(policy: AuthorizationPolicy, p: Problems) -> None:
    spec = policy.spec
    if spec.action == Action.CUSTOM:
        if not spec.rules:
            p.error(
                (*SPEC, "rules"),
                "CUSTOM action without `rules` is meaningless as it will never be triggered; "
                "add an empty rule `{}` to trigger it for every request",
            )
        elif spec.provider is None or not spec.provider.name:
            p.error((*SPEC, "provider", "name"), "`provider.name` must not be empty")
        _check_custom_rules(p, spec.rules)
    elif spec.provider is not None:
        p.error(
            (*SPEC, "provider"),
            f"`provider` must not be set with a non-CUSTOM action ({spec.action})",
        )
    if spec.action == Action.DENY and not spec.rules:
        p.warning(
            (*SPEC, "rules"),
            "DENY action without `rules` is meaningless as it will never be triggered; "
            "add an empty rule `{}` to trigger it for every request",
        )


def _check_custom_rules(p: Problems, rules: Sequence[Rule | None]) -> None:
    for i, rule in enumerate(rules):
        if rule is None:
            continue
        for j, rule_from in enumerate(rule.from_ or ()):
            src = rule_from.source if rule_from else None
            if src is None:
                continue
            for field in ("namespaces", "notNamespaces", "principals", "notPrincipals"):
                if getattr(src, _snake(field)):
                    p.error(
                        (*SPEC, "rules", i, "from", j, "source", field),
                        f"{field} is not supported with the CUSTOM action",
                    )
        for j, cond in enumerate(rule.when or ()):
            if cond.key in _CUSTOM_UNSUPPORTED_KEYS or cond.key.startswith("request.auth."):
                p.error(
                    (*SPEC, "rules", i, "when", j, "key"),
                    f"{cond.key} is not supported with the CUSTOM action",
                )


def _check_rule(p: Problems, path: Path, rule: Rule) -> None:
    if rule.from_ is not None and not rule.from_:
        p.error((*path, "from"), "`from` must not be empty; remove `from` to match any source")
    for j, rule_from in enumerate(rule.from_ or ()):
        where = (*path, "from", j)
        if rule_from is None or rule_from.source is None:
            p.error((*where, "source"), "`from.source` must not be null")
        elif rule_from.source.is_empty():
            p.error((*where, "source"), "`from.source` must not be empty")
        else:
            _check_source(p, (*where, "source"), rule_from.source)
    if rule.to is not None and not rule.to:
        p.error((*path, "to"), "`to` must not be empty; remove `to` to match any operation")
    for j, rule_to in enumerate(rule.to or ()):
        where = (*path, "to", j)
        if rule_to is None or rule_to.operation is None:
            p.error((*where, "operation"), "`to.operation` must not be null")
        elif rule_to.operation.is_empty():
            p.error((*where, "operation"), "`to.operation` must not be empty")
        else:
            _check_operation(p, (*where, "operation"), rule_to.operation)
    for j, cond in enumerate(rule.when or ()):
        _check_condition(p, (*path, "when", j), cond)


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)


def _check_values(p: Problems, path: Path, values: Sequence[str] | None, kind: str = "") -> None:
    for k, value in enumerate(values or ()):
        if value == "":
            p.error((*path, k), "empty value not allowed")
        elif kind == "ip":
            p.add((*path, k), ip_or_cidr_error(value))
        elif kind == "port":
            if not value.isdigit() or int(value) > 65535:
                p.error((*path, k), f"invalid port {quoted(value)}: must be a number in 0..65535")
        elif "*" in value[1:-1]:
            p.warning(
                (*path, k),
                f"{quoted(value)}: `*` is only a wildcard as the first or last character "
                "(prefix, suffix or presence match); here it is matched literally",
            )


_SOURCE_KINDS = {"ipBlocks": "ip", "notIpBlocks": "ip", "remoteIpBlocks": "ip"}
_SOURCE_KINDS["notRemoteIpBlocks"] = "ip"


def _check_source(p: Problems, path: Path, src: Source) -> None:
    for name in type(src).model_fields:
        field = type(src).model_fields[name].alias or name
        if field in ("trustDomains", "notTrustDomains"):
            _check_trust_domains(p, (*path, field), getattr(src, name))
            continue
        _check_values(p, (*path, field), getattr(src, name), _SOURCE_KINDS.get(field, ""))
    if (src.service_accounts or src.not_service_accounts) and (
        src.namespaces or src.not_namespaces or src.principals or src.not_principals
    ):
        p.error(
            (*path, "serviceAccounts"),
            "cannot set serviceAccounts together with namespaces or principals",
        )


def _check_trust_domains(p: Problems, path: Path, values: Sequence[str] | None) -> None:
    for k, value in enumerate(values or ()):
        if not value:
            p.error((*path, k), "empty value not allowed")
        elif "/" in value or value.startswith("spiffe:"):
            p.error(
                (*path, k),
                f"invalid trust domain {quoted(value)}: give the trust domain alone, "
                "such as `cluster.local`, without `spiffe://` or a path",
            )


def _check_operation(p: Problems, path: Path, op: Operation) -> None:
    for name in type(op).model_fields:
        field = type(op).model_fields[name].alias or name
        kind = "port" if field in ("ports", "notPorts") else ""
        _check_values(p, (*path, field), getattr(op, name), kind)


def _check_condition(p: Problems, path: Path, cond: Condition) -> None:
    key = cond.key
    if not key:
        p.error((*path, "key"), "`key` must not be empty")
        return
    if not cond.values and not cond.not_values:
        p.error(path, f"at least one of `values` or `notValues` must be set for key {key}")
        return
    kind = _PLAIN_KEYS.get(key)
    if kind is None and not _is_map_key(key):
        p.error((*path, "key"), f"unknown attribute {quoted(key)}")
        return
    _check_values(p, (*path, "values"), cond.values, kind or "")
    _check_values(p, (*path, "notValues"), cond.not_values, kind or "")


def _is_map_key(key: str) -> bool:
    """`request.headers[name]`, `request.auth.claims[a][b]`, `experimental.envoy.filters.x[k]`."""
    for prefix in (HEADER_KEY, CLAIMS_KEY):
        if key.startswith(prefix + "[") and key.endswith("]") and len(key) > len(prefix) + 2:
            return True
    if key.startswith(ENVOY_FILTER_KEY):
        open_at = key.find("[")
        return key.endswith("]") and 0 < open_at < len(key) - 2
    return False
