"""AuthorizationPolicy (security.istio.io): who may call a workload, and how.

A policy selects workloads (no selector: every workload of its namespace; in the root
namespace: the whole mesh) and carries an action and rules. A rule matches when one of its
`from` sources, one of its `to` operations and every `when` condition match; inside a
source or operation every set field must match (AND), and any value of a field may (OR).
ALLOW with no rules matches nothing (so it denies everything); `rules: [{}]` matches all.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from meshpilot.config.base import ApiModel, TopLevel
from meshpilot.config.istio.common import WorkloadSelector

__all__ = [
    "Action",
    "AuthorizationPolicy",
    "AuthorizationPolicySpec",
    "Condition",
    "Operation",
    "PolicyTargetReference",
    "Rule",
    "Source",
]


def _numbers_as_strings(value: Any) -> Any:
    """`ports: [80]` is common in hand-written YAML; the API field is a list of strings."""
    if isinstance(value, list):
        return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value


Strings = Annotated[list[str] | None, BeforeValidator(_numbers_as_strings)]


class Action(StrEnum):
    ALLOW = "ALLOW"
    DENY = "DENY"
    AUDIT = "AUDIT"
    CUSTOM = "CUSTOM"


class Source(ApiModel):
    principals: list[str] | None = None
    not_principals: list[str] | None = None
    # Peer identities of these SPIFFE trust domains (`spiffe://<td>/...`); Istio 1.30.
    trust_domains: list[str] | None = None
    not_trust_domains: list[str] | None = None
    request_principals: list[str] | None = None
    not_request_principals: list[str] | None = None
    namespaces: list[str] | None = None
    not_namespaces: list[str] | None = None
    service_accounts: list[str] | None = None
    not_service_accounts: list[str] | None = None
    ip_blocks: list[str] | None = None
    not_ip_blocks: list[str] | None = None
    remote_ip_blocks: list[str] | None = None
    not_remote_ip_blocks: list[str] | None = None

    def is_empty(self) -> bool:
        return not any(getattr(self, name) for name in type(self).model_fields)


class Operation(ApiModel):
    hosts: list[str] | None = None
    not_hosts: list[str] | None = None
    ports: Strings = None
    not_ports: Strings = None
    methods: list[str] | None = None
    not_methods: list[str] | None = None
    paths: list[str] | None = None
    not_paths: list[str] | None = None

    def is_empty(self) -> bool:
        return not any(getattr(self, name) for name in type(self).model_fields)


class RuleFrom(ApiModel):
    source: Source | None = None


class RuleTo(ApiModel):
    operation: Operation | None = None


class Condition(ApiModel):
    key: str = ""
    values: Strings = None
    not_values: Strings = None


class Rule(ApiModel):
    # `from` is a Python keyword; None (absent) differs from [] (invalid) as in Istio.
    from_: list[RuleFrom | None] | None = Field(default=None, alias="from")
    to: list[RuleTo | None] | None = None
    when: list[Condition] | None = None


class ExtensionProvider(ApiModel):
    name: str = ""


class PolicyTargetReference(ApiModel):
    group: str = ""
    kind: str = ""
    name: str = ""
    namespace: str = ""


class AuthorizationPolicySpec(ApiModel):
    selector: WorkloadSelector | None = None
    target_ref: PolicyTargetReference | None = None
    target_refs: list[PolicyTargetReference] | None = None
    # None entries are kept so that validation can point at `rules[i]` (Istio skips them).
    rules: list[Rule | None] = Field(default_factory=list)
    # A plain string: validation reports an unknown action with its path.
    action: str = Action.ALLOW.value
    provider: ExtensionProvider | None = None

    @property
    def has_target_refs(self) -> bool:
        return self.target_ref is not None or bool(self.target_refs)


class AuthorizationPolicy(TopLevel):
    spec: AuthorizationPolicySpec = AuthorizationPolicySpec()

    @property
    def dry_run(self) -> bool:
        """`istio.io/dry-run: "true"`: evaluated and logged in shadow rules, not enforced."""
        return self.metadata.annotations.get(DRY_RUN_ANNOTATION, "") in DRY_RUN_TRUE


DRY_RUN_ANNOTATION = "istio.io/dry-run"
# Go's strconv.ParseBool, which Istio uses for the annotation.
DRY_RUN_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
DRY_RUN_VALUES = DRY_RUN_TRUE | {"0", "f", "F", "FALSE", "false", "False"}
__all__ += ["DRY_RUN_ANNOTATION", "DRY_RUN_VALUES", "ExtensionProvider", "RuleFrom", "RuleTo"]
