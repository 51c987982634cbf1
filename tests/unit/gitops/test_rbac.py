"""Casbin-style RBAC as Argo CD: the seed's policies, default role, deny wins, built-ins,
project roles, and the `permission denied` message."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshpilot.gitops.errors import PermissionDenied, RbacConfigError
from meshpilot.gitops.model import AppProject
from meshpilot.gitops.rbac import (
    Enforcer,
    app_objects,
    load_policy_file,
    parse_policy_csv,
    policy_from_config_map,
)

ENV_ROLES = {
    "policy.default": "role:developer",
    "policy.csv": """
p, role:developer, *, *, dev/*/*, allow
p, role:maintainer, *, *, dev/*/*, allow
p, role:maintainer, *, *, prd/*/*, allow

g, developers, role:developer
g, maintainers, role:maintainer
""",
    "scopes": "[groups]",
}


def test_seed_environment_roles() -> None:
    enforcer = Enforcer(policy_from_config_map(ENV_ROLES))
    prd = app_objects("prd", "foo", "web")
    dev = app_objects("dev", "foo", "web")
    assert enforcer.enforce("alice", ["maintainers"], "applications", "sync", prd)
    assert not enforcer.enforce("bob", ["developers"], "applications", "sync", prd)
    # policy.default gives every user role:developer.
    assert enforcer.enforce("carol", [], "applications", "sync", dev)
    assert enforcer.policy.scopes == ("groups",)


def test_deny_wins_over_an_allow_from_another_role() -> None:
    policy = policy_from_config_map(
        {
            "policy.csv": """
p, role:team, applications, *, shop/*, allow
p, role:no-prod-sync, applications, sync, shop/prod-*, deny
g, team, role:team
g, interns, role:no-prod-sync
"""
        }
    )
    enforcer = Enforcer(policy)
    assert enforcer.enforce("dan", ["team"], "applications", "sync", "shop/prod-web")
    assert not enforcer.enforce("eve", ["team", "interns"], "applications", "sync", "shop/prod-web")
    assert enforcer.enforce("eve", ["team", "interns"], "applications", "get", "shop/prod-web")


def test_builtin_roles_and_admin() -> None:
    enforcer = Enforcer(policy_from_config_map({"policy.default": "role:readonly"}))
    assert enforcer.enforce("admin", [], "applications", "delete", "any/app")
    assert enforcer.enforce("frank", [], "applications", "get", "any/app")
    assert enforcer.enforce("frank", [], "projects", "get", "any")
    assert not enforcer.enforce("frank", [], "applications", "sync", "any/app")
    assert not Enforcer.builtin().enforce("frank", [], "applications", "get", "any/app")


def test_permission_denied_message() -> None:
    with pytest.raises(PermissionDenied) as err:
        Enforcer.builtin().check("frank", [], "applications", "sync", "proj/app")
    assert str(err.value) == "permission denied: applications, sync, proj/app, sub: frank"


def test_project_roles_bind_groups_to_their_own_project_only() -> None:
    project = AppProject.model_validate(
        {
            "metadata": {"name": "shop"},
            "spec": {
                "roles": [
                    {
                        "name": "ci",
                        "policies": [
                            "p, proj:shop:ci, applications, sync, shop/*, allow",
                            "p, proj:shop:ci, applications, sync, other/*, allow",
                        ],
                        "groups": ["ci-bots"],
                    }
                ]
            },
        }
    )
    enforcer = Enforcer(policy_from_config_map({}), [project])
    assert enforcer.enforce("bot", ["ci-bots"], "applications", "sync", "shop/web")
    assert not enforcer.enforce("bot", ["ci-bots"], "applications", "sync", "other/web")


def test_bad_policy_line_names_file_and_line() -> None:
    with pytest.raises(RbacConfigError) as err:
        parse_policy_csv("p, role:x, applications, get, */*, allow\np, role:x, oops\n", "rbac.csv")
    assert str(err.value).startswith("rbac.csv:2: expected 'p, subject, resource, action,")
    with pytest.raises(RbacConfigError, match="effect must be allow or deny"):
        parse_policy_csv("p, role:x, applications, get, */*, maybe")


def test_policy_file_as_csv_or_config_map(tmp_path: Path) -> None:
    csv = tmp_path / "policy.csv"
    csv.write_text("p, role:ops, applications, sync, */*, allow\ng, ops, role:ops\n")
    assert Enforcer(load_policy_file(str(csv))).enforce("x", ["ops"], "applications", "sync", "a/b")
    cm = tmp_path / "rbac.yaml"
    cm.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd-rbac-cm}\n"
        "data:\n  policy.default: role:readonly\n"
    )
    enforcer = Enforcer(load_policy_file(str(cm)))
    assert enforcer.enforce("x", [], "applications", "get", "a/b")
    assert not enforcer.enforce("x", [], "applications", "sync", "a/b")
