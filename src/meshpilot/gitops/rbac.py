"""Argo CD's RBAC: Casbin-style CSV policy, enforced on every CLI and API action.

    p, <subject>, <resource>, <action>, <object>, <allow|deny>
    g, <user or group>, <role>

Resources are Argo CD's (applications, applicationsets, projects, repositories, clusters,
certificates, accounts, gpgkeys, logs, exec); actions get, create, update, delete, sync,
override, action/<...>; objects `<project>/<app>` or `<project>/<namespace>/<app>` for
applications (both forms are tried, spec §7.4), the plain name otherwise. `*` matches
anything, `/` included, as Argo CD's glob matcher. A request is allowed when some rule of
the user, their groups, `policy.default` or a role any of them holds allows it and no such
rule denies it: deny wins across all of them (stricter than Argo CD, which checks the
default role and each subject separately, so a group's deny cannot be bypassed).

The built-in `role:readonly` and `role:admin` and the `admin` user are always present, as in
Argo CD's builtin-policy.csv. AppProject roles add `proj:<project>:<role>` subjects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from meshpilot.gitops.errors import PermissionDenied, RbacConfigError
from meshpilot.gitops.model import AppProject

__all__ = [
    "ADMIN_USER",
    "RBAC_CONFIG_MAP",
    "Enforcer",
    "PolicyRule",
    "RbacPolicy",
    "app_objects",
    "load_policy_file",
    "parse_policy_csv",
    "policy_from_config_map",
]

ADMIN_USER = "admin"
RBAC_CONFIG_MAP = "argocd-rbac-cm"

# Argo CD's assets/builtin-policy.csv (plus `rollback`, which `gitops rollback` checks).
_BUILTIN = """\
p, role:readonly, applications, get, */*, allow
p, role:readonly, applicationsets, get, */*, allow
p, role:readonly, logs, get, */*, allow
p, role:readonly, certificates, get, *, allow
p, role:readonly, clusters, get, *, allow
p, role:readonly, repositories, get, *, allow
p, role:readonly, write-repositories, get, *, allow
p, role:readonly, projects, get, *, allow
p, role:readonly, accounts, get, *, allow
p, role:readonly, gpgkeys, get, *, allow
p, role:admin, applications, create, */*, allow
p, role:admin, applications, update, */*, allow
p, role:admin, applications, update/*, */*, allow
p, role:admin, applications, delete, */*, allow
p, role:admin, applications, delete/*, */*, allow
p, role:admin, applications, sync, */*, allow
p, role:admin, applications, rollback, */*, allow
p, role:admin, applications, override, */*, allow
p, role:admin, applications, action/*, */*, allow
p, role:admin, applicationsets, create, */*, allow
p, role:admin, applicationsets, update, */*, allow
p, role:admin, applicationsets, delete, */*, allow
p, role:admin, certificates, create, *, allow
p, role:admin, certificates, update, *, allow
p, role:admin, certificates, delete, *, allow
p, role:admin, clusters, create, *, allow
p, role:admin, clusters, update, *, allow
p, role:admin, clusters, delete, *, allow
p, role:admin, repositories, create, *, allow
p, role:admin, repositories, update, *, allow
p, role:admin, repositories, delete, *, allow
p, role:admin, write-repositories, create, *, allow
p, role:admin, write-repositories, update, *, allow
p, role:admin, write-repositories, delete, *, allow
p, role:admin, projects, create, *, allow
p, role:admin, projects, update, *, allow
p, role:admin, projects, delete, *, allow
p, role:admin, accounts, update, *, allow
p, role:admin, gpgkeys, create, *, allow
p, role:admin, gpgkeys, delete, *, allow
p, role:admin, exec, create, */*, allow
g, role:admin, role:readonly
g, admin, role:admin
"""


@dataclass(frozen=True, slots=True)
class PolicyRule:
    subject: str
    resource: str
    action: str
    object: str
    effect: str  # "allow" or "deny"


@dataclass(frozen=True, slots=True)
class RbacPolicy:
    rules: tuple[PolicyRule, ...] = ()
    # `g` lines: member (user, group or role) -> roles it holds.
    bindings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    default_role: str = ""
    scopes: tuple[str, ...] = ("groups",)

    def merged(self, other: RbacPolicy) -> RbacPolicy:
        bindings = {k: tuple(v) for k, v in self.bindings.items()}
        for member, roles in other.bindings.items():
            bindings[member] = (*bindings.get(member, ()), *roles)
        return RbacPolicy(
            self.rules + other.rules,
            bindings,
            other.default_role or self.default_role,
            other.scopes if other.scopes != ("groups",) else self.scopes,
        )


def parse_policy_csv(text: str, file: str = "policy.csv") -> RbacPolicy:
    """Parse policy lines; RbacConfigError names the file and line of a bad one."""
    rules: list[PolicyRule] = []
    bindings: dict[str, list[str]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",")]
        if parts[0] == "p" and len(parts) in (5, 6):
            effect = parts[5] if len(parts) == 6 else "allow"
            if effect not in ("allow", "deny"):
                raise RbacConfigError(
                    f"{file}:{number}: effect must be allow or deny, got {effect!r}"
                )
            rules.append(PolicyRule(parts[1], parts[2], parts[3], parts[4], effect))
        elif parts[0] == "g" and len(parts) == 3:
            bindings.setdefault(parts[1], []).append(parts[2])
        else:
            raise RbacConfigError(
                f"{file}:{number}: expected 'p, subject, resource, action, object, effect' "
                f"or 'g, subject, role', got {line!r}"
            )
    return RbacPolicy(tuple(rules), {k: tuple(v) for k, v in bindings.items()})


def _parse_scopes(text: str) -> tuple[str, ...]:
    items = [s.strip().strip("'\"") for s in text.strip().strip("[]").split(",")]
    return tuple(s for s in items if s) or ("groups",)


def policy_from_config_map(data: Mapping[str, str], file: str = RBAC_CONFIG_MAP) -> RbacPolicy:
    """argocd-rbac-cm: `policy.csv`, overlays `policy.<name>.csv`, `policy.default`,
    `scopes`. The built-in policy is included."""
    policy = parse_policy_csv(_BUILTIN, "builtin-policy.csv")
    names = ["policy.csv", *sorted(k for k in data if re.fullmatch(r"policy\..+\.csv", k))]
    for name in names:
        if name in data:
            policy = policy.merged(parse_policy_csv(data[name], f"{file}: {name}"))
    return RbacPolicy(
        policy.rules,
        policy.bindings,
        data.get("policy.default", "").strip(),
        _parse_scopes(data.get("scopes", "[groups]")),
    )


def _project_policy(projects: Iterable[AppProject]) -> RbacPolicy:
    """AppProject roles: `proj:<p>:<role>` subjects with their policies and groups."""
    rules: list[PolicyRule] = []
    bindings: dict[str, list[str]] = {}
    for project in projects:
        for role in project.spec.roles:
            subject = f"proj:{project.metadata.name}:{role.name}"
            text = "\n".join(role.policies)
            for rule in parse_policy_csv(text, f"AppProject {project.metadata.name}").rules:
                # A project role may only speak about its own project's objects.
                if rule.subject == subject and rule.object.startswith(f"{project.metadata.name}/"):
                    rules.append(rule)
            for group in role.groups:
                bindings.setdefault(group, []).append(subject)
    return RbacPolicy(tuple(rules), {k: tuple(v) for k, v in bindings.items()})


@lru_cache(maxsize=512)
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


def _match(pattern: str, value: str) -> bool:
    return pattern == "*" or pattern == value or _compile(pattern).fullmatch(value) is not None


def app_objects(project: str, namespace: str, name: str) -> tuple[str, ...]:
    """The RBAC objects an Application answers to: `proj/app` and `proj/ns/app`."""
    return (f"{project}/{name}", f"{project}/{namespace}/{name}")


class Enforcer:
    """`enforce(user, groups, resource, action, obj)`; `check` raises PermissionDenied."""

    def __init__(self, policy: RbacPolicy, projects: Iterable[AppProject] = ()) -> None:
        self.policy = policy.merged(_project_policy(projects))

    @classmethod
    def builtin(cls) -> Enforcer:
        """Only the built-in policy: `admin` may do anything, nobody else anything."""
        return cls(policy_from_config_map({}))

    def roles_of(self, user: str, groups: Sequence[str]) -> frozenset[str]:
        """The user, their groups, the default role, and every role they hold (transitively)."""
        pending = [user, *groups]
        if self.policy.default_role:
            pending.append(self.policy.default_role)
        seen: set[str] = set()
        while pending:
            subject = pending.pop()
            if subject in seen:
                continue
            seen.add(subject)
            pending.extend(self.policy.bindings.get(subject, ()))
        return frozenset(seen)

    def enforce(
        self, user: str, groups: Sequence[str], resource: str, action: str, obj: str | Sequence[str]
    ) -> bool:
        objects = (obj,) if isinstance(obj, str) else tuple(obj)
        subjects = self.roles_of(user, groups)
        allowed = False
        for rule in self.policy.rules:
            if rule.subject not in subjects:
                continue
            if not (_match(rule.resource, resource) and _match(rule.action, action)):
                continue
            if not any(_match(rule.object, o) for o in objects):
                continue
            if rule.effect == "deny":
                return False
            allowed = True
        return allowed

    def check(
        self, user: str, groups: Sequence[str], resource: str, action: str, obj: str | Sequence[str]
    ) -> None:
        """Raise Argo CD's `permission denied: <resource>, <action>, <object>, sub: <user>`."""
        if not self.enforce(user, groups, resource, action, obj):
            shown = obj if isinstance(obj, str) else obj[0]
            raise PermissionDenied(resource, action, shown, user)


def load_policy_file(path: str) -> RbacPolicy:
    """An RBAC policy from a file: an argocd-rbac-cm ConfigMap (YAML), a mapping of its data
    keys, or a bare policy CSV."""
    from meshpilot.config.yaml_load import YAMLInputError, load_yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RbacConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        data = load_yaml(text, path)
    except YAMLInputError:
        data = None  # a bare policy CSV
    if isinstance(data, dict):
        payload = data.get("data") if data.get("kind") == "ConfigMap" else data
        if isinstance(payload, dict) and all(isinstance(v, str) for v in payload.values()):
            return policy_from_config_map(payload, path)
    policy = parse_policy_csv(text, path)
    return policy_from_config_map({}).merged(policy)
