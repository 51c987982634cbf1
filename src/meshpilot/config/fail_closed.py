"""Stand-ins for security policies that failed validation: they deny, they never vanish.

An AuthorizationPolicy, PeerAuthentication or RequestAuthentication that cannot be used
would widen access if it were simply skipped (a workload whose only ALLOW policy is dropped
allows everything). A store keeps the last good version of such an object; when there is
none, the loader's stand-in is served instead. It selects what the policy selects, as far as
the raw document can tell (namespace and selector; a selector that cannot be read selects
every workload of the namespace, or of the mesh in the root namespace), and:

- AuthorizationPolicy (ALLOW, DENY, CUSTOM or an unreadable action): denies every request
  (an RBAC filter of its own, stat prefix `invalid_policy_<ns>_<name>`). AUDIT and dry-run
  policies never allow or deny anything and are skipped as before.
- PeerAuthentication: STRICT on every port, ahead of the other policies of its level.
- RequestAuthentication: rejects (401) every request that carries a token where the policy
  (or Envoy by default) looks for one, since no token can be checked; requests without a
  token go on to authorization, which sees no request principal.

The loader's error diagnostics of such an object end with the kind's FAIL_CLOSED note; a
store that keeps the last good version swaps it for LAST_GOOD_KEPT (`kept_last_good`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from meshpilot.config.base import ObjectMeta, TopLevel
from meshpilot.config.diagnostics import Diagnostic, Origin
from meshpilot.config.istio.authorization_policy import (
    DRY_RUN_ANNOTATION,
    DRY_RUN_TRUE,
    AuthorizationPolicy,
    AuthorizationPolicySpec,
    PolicyTargetReference,
    Rule,
)
from meshpilot.config.istio.common import WorkloadSelector
from meshpilot.config.istio.peer_authentication import (
    MtlsMode,
    MutualTls,
    PeerAuthentication,
    PeerAuthenticationSpec,
)
from meshpilot.config.istio.request_authentication import (
    JWTHeader,
    JWTRule,
    RequestAuthentication,
    RequestAuthenticationSpec,
)
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject

__all__ = [
    "FAIL_CLOSED",
    "LAST_GOOD_KEPT",
    "SECURITY_KINDS",
    "failing_closed_message",
    "kept_last_good",
    "log_fail_closed",
    "stand_in",
]

log = logging.getLogger(__name__)

FAIL_CLOSED: Mapping[Kind, str] = {
    Kind.AUTHORIZATION_POLICY: "failing closed: every request to the workloads it selects "
    "is denied until it is fixed",
    Kind.PEER_AUTHENTICATION: "failing closed: mutual TLS only (STRICT) for the workloads "
    "it selects until it is fixed",
    Kind.REQUEST_AUTHENTICATION: "failing closed: every request with a JWT to the workloads "
    "it selects is rejected (401) until it is fixed",
}
SECURITY_KINDS = frozenset(FAIL_CLOSED)
LAST_GOOD_KEPT = "the last good version is kept until it is fixed"
_KIND_NAMES = frozenset(str(k) for k in SECURITY_KINDS)
# Where Envoy's jwt_authn looks for a token when a rule names no location.
_DEFAULT_HEADER = JWTHeader(name="Authorization", prefix="Bearer ")
_DEFAULT_PARAM = "access_token"


def failing_closed_message(kind: Kind, message: str) -> str:
    return f"{message}; {FAIL_CLOSED[kind]}"


def kept_last_good(
    diagnostics: Iterable[Diagnostic], keys: Iterable[ConfigKey]
) -> tuple[Diagnostic, ...]:
    """`diagnostics` with the fail-closed note of the objects at `keys` (served from their
    last good version) replaced by LAST_GOOD_KEPT."""
    kept = {(str(k.kind), k.namespace, k.name) for k in keys if k.kind in SECURITY_KINDS}
    out = []
    for diag in diagnostics:
        note = FAIL_CLOSED.get(Kind(diag.kind)) if diag.kind in _KIND_NAMES else None
        if note and (diag.kind, diag.namespace, diag.name) in kept:
            diag = _with_message(diag, diag.message.replace(note, LAST_GOOD_KEPT))
        out.append(diag)
    return tuple(out)


def log_fail_closed(
    objects: Mapping[ConfigKey, ConfigObject[Any]], before: Mapping[ConfigKey, ConfigObject[Any]]
) -> None:
    """Log, as an error, every stand-in that `objects` serves and `before` did not."""
    for key, obj in objects.items():
        old = before.get(key)
        if obj.fail_closed and (old is None or old.fail_closed != obj.fail_closed):
            log.error(
                "%s %s/%s at %s is invalid (%s) and has no last good version; %s",
                key.kind, key.namespace, key.name, obj.location, obj.fail_closed,
                FAIL_CLOSED[key.kind],
            )  # fmt: skip


def _with_message(diag: Diagnostic, message: str) -> Diagnostic:
    return Diagnostic(
        diag.file, diag.line, message, diag.kind, diag.namespace, diag.name, diag.field,
        diag.severity, diag.code,
    )  # fmt: skip


def stand_in(
    kind: Kind, key: ConfigKey, data: Mapping[str, Any], origin: Origin, reason: str
) -> ConfigObject[TopLevel] | None:
    """The fail-closed stand-in for the invalid security policy `data`; None for an
    AUDIT or dry-run AuthorizationPolicy, whose loss cannot widen access."""
    spec = data.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    meta = _meta(data, key)
    selector = _read(WorkloadSelector, spec.get("selector"))
    model: TopLevel
    if kind is Kind.AUTHORIZATION_POLICY:
        if (
            spec.get("action") == "AUDIT"
            or meta.annotations.get(DRY_RUN_ANNOTATION) in DRY_RUN_TRUE
        ):
            return None
        model = AuthorizationPolicy(
            api_version="security.istio.io/v1",
            kind=str(kind),
            metadata=meta,
            spec=AuthorizationPolicySpec(
                selector=selector, target_refs=_target_refs(spec, selector), action="DENY",
                rules=[Rule()],
            ),
        )  # fmt: skip
    elif kind is Kind.PEER_AUTHENTICATION:
        model = PeerAuthentication(
            api_version="security.istio.io/v1",
            kind=str(kind),
            metadata=meta,
            spec=PeerAuthenticationSpec(selector=selector, mtls=MutualTls(mode=MtlsMode.STRICT)),
        )
    elif kind is Kind.REQUEST_AUTHENTICATION:
        model = RequestAuthentication(
            api_version="security.istio.io/v1",
            kind=str(kind),
            metadata=meta,
            spec=RequestAuthenticationSpec(
                selector=selector, target_refs=_target_refs(spec, selector),
                jwt_rules=[_unverifiable_rule(spec.get("jwtRules"))],
            ),
        )  # fmt: skip
    else:
        return None
    return ConfigObject(key, model, origin, fail_closed=reason)


def _read(model: type[BaseModel], value: Any) -> Any:
    """`value` as `model`, or None when it is absent or cannot be read."""
    if value is None:
        return None
    try:
        return model.model_validate(value)
    except ValidationError:
        return None


def _meta(data: Mapping[str, Any], key: ConfigKey) -> ObjectMeta:
    """Name and namespace from the key; labels, annotations and creation time when they can
    be read (the creation time orders policies)."""
    raw = data.get("metadata")
    raw = raw if isinstance(raw, dict) else {}
    fields: dict[str, Any] = {"name": key.name, "namespace": key.namespace}
    for name in ("labels", "annotations"):
        value = raw.get(name)
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            fields[name] = {str(k): v for k, v in value.items()}
    stamp = raw.get("creationTimestamp")
    if isinstance(stamp, str):
        fields["creation_timestamp"] = stamp
    return ObjectMeta(**fields)


def _target_refs(
    spec: Mapping[str, Any], selector: WorkloadSelector | None
) -> list[PolicyTargetReference] | None:
    """The policy's targetRef(s) when they can all be read and no selector is set (then it
    applies where a valid one would); otherwise None: the selector, or the namespace."""
    if selector is not None:
        return None
    many = spec.get("targetRefs")
    if many is not None and not isinstance(many, list):
        return None
    raw = [*([spec["targetRef"]] if "targetRef" in spec else []), *(many or [])]
    refs = [_read(PolicyTargetReference, r) for r in raw]
    return refs if refs and all(r is not None for r in refs) else None


def _unverifiable_rule(raw_rules: Any) -> JWTRule:
    """One rule for any issuer with a key set no token verifies against, looking for tokens
    where Envoy does by default and wherever the invalid rules said (when readable)."""
    headers, params, cookies = [_DEFAULT_HEADER], [_DEFAULT_PARAM], []
    for raw in raw_rules if isinstance(raw_rules, list) else []:
        if not isinstance(raw, dict):
            continue
        for item in raw.get("fromHeaders") or []:
            header = _read(JWTHeader, item)
            if header is not None and header.name and header not in headers:
                headers.append(header)
        params += [p for p in raw.get("fromParams") or [] if isinstance(p, str) and p]
        cookies += [c for c in raw.get("fromCookies") or [] if isinstance(c, str) and c]
    return JWTRule(
        from_headers=headers,
        from_params=list(dict.fromkeys(params)),
        from_cookies=list(dict.fromkeys(cookies)),
    )
