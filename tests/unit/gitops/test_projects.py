"""AppProject checks with Argo CD's messages (spec §9.9), on the seed's tenant layout."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from meshpilot.gitops.errors import ProjectError
from meshpilot.gitops.model import Application, AppProject
from meshpilot.gitops.projects import (
    ProjectIndex,
    application_violations,
    check_application,
    is_destination_permitted,
    is_source_permitted,
    resource_violation,
)

FOO_CLUSTER = "https://foo-cluster.gr7.ap-northeast-1.eks.amazonaws.com"
BAR_CLUSTER = "https://bar-cluster.gr7.ap-northeast-1.eks.amazonaws.com"
IN_CLUSTER = "https://kubernetes.default.svc"


def project(name: str = "infra", namespace: str = "foo", **spec: Any) -> AppProject:
    spec.setdefault("sourceRepos", ["https://github.com/myorg/*"])
    spec.setdefault(
        "destinations",
        [
            {"namespace": "foo", "server": IN_CLUSTER},
            {"namespace": "infra", "server": FOO_CLUSTER},
        ],
    )
    return AppProject.model_validate(
        {"metadata": {"name": name, "namespace": namespace}, "spec": spec}
    )


def app(
    server: str = FOO_CLUSTER,
    namespace: str = "infra",
    project_name: str = "infra",
    app_ns: str = "foo",
    repo: str = "https://github.com/MyOrg/infra.git",
) -> Application:
    return Application.model_validate(
        yaml.safe_load(f"""
metadata: {{name: monitoring, namespace: {app_ns}}}
spec:
  project: {project_name}
  source: {{repoURL: "{repo}", path: charts}}
  destination: {{server: "{server}", namespace: {namespace}}}
""")
    )


def test_permitted_deployment() -> None:
    assert application_violations(app(), ProjectIndex([project()])) == []


@pytest.mark.parametrize(
    ("application", "message"),
    [
        (
            app(project_name="app"),
            "Application referencing project app which does not exist",
        ),
        (
            app(server=BAR_CLUSTER),
            "application destination {" + BAR_CLUSTER + " infra} is not permitted in project "
            "'infra'",
        ),
        (
            app(namespace="app"),
            "application destination {" + FOO_CLUSTER + " app} is not permitted in project 'infra'",
        ),
        (
            app(repo="https://github.com/evil/infra"),
            "application repo https://github.com/evil/infra is not permitted in project 'infra'",
        ),
    ],
)
def test_refusals_use_argo_cd_messages(application: Application, message: str) -> None:
    assert application_violations(application, ProjectIndex([project()])) == [message]
    with pytest.raises(ProjectError, match="not"):
        check_application(application, ProjectIndex([project()]))


def test_source_namespaces_in_cluster_mode() -> None:
    shared = project(namespace="argocd", sourceNamespaces=["foo"])
    index = ProjectIndex([shared])
    assert application_violations(app(app_ns="foo"), index) == []
    assert application_violations(app(app_ns="bar"), index) == [
        "application 'monitoring' in namespace 'bar' is not permitted to use project 'infra'"
    ]
    # Apps in the control namespace always may use its projects.
    assert application_violations(app(app_ns="argocd"), index) == []


def test_default_project_exists_implicitly_and_is_permissive() -> None:
    anywhere = app(project_name="default", server=BAR_CLUSTER, namespace="x")
    assert application_violations(anywhere, ProjectIndex([])) == []


def test_repo_globs_and_negation() -> None:
    p = project(sourceRepos=["https://github.com/myorg/*", "!https://github.com/myorg/secret"])
    assert is_source_permitted(p, "https://github.com/MyOrg/web.git")
    assert not is_source_permitted(p, "https://github.com/myorg/secret.git")
    # As in Argo CD, a deny entry that does not match counts as a match.
    assert is_source_permitted(p, "https://github.com/other/web")
    org = project(sourceRepos=["https://github.com/myorg/*"])
    assert not is_source_permitted(org, "https://github.com/myorg/team/nested")  # * stops at /
    assert is_source_permitted(project(sourceRepos=["https://github.com/myorg/**"]),
                               "https://github.com/myorg/team/nested")  # fmt: skip
    assert is_source_permitted(project(sourceRepos=["git@github.com:myorg/*"]),
                               "ssh://git@github.com/myorg/web.git")  # fmt: skip


def test_destination_globs_names_and_negation() -> None:
    p = project(
        destinations=[
            {"server": "*", "namespace": "team-*"},
            {"server": "*", "namespace": "!team-admin"},
        ]
    )
    ok = app(namespace="team-web").spec.destination
    denied = app(namespace="team-admin").spec.destination
    assert is_destination_permitted(p, ok)
    assert not is_destination_permitted(p, denied)
    by_name = project(destinations=[{"name": "in-cluster", "namespace": "*"}])
    assert is_destination_permitted(by_name, app(server=IN_CLUSTER).spec.destination)


def test_resource_kinds() -> None:
    p = project(
        clusterResourceWhitelist=[{"group": "", "kind": "Namespace"}],
        namespaceResourceBlacklist=[{"group": "", "kind": "ResourceQuota"}],
    )
    a = app()
    assert resource_violation(p, a, "", "Namespace", None) is None
    assert (
        resource_violation(p, a, "rbac.authorization.k8s.io", "ClusterRole", None)
        == "resource rbac.authorization.k8s.io:ClusterRole is not permitted in project infra"
    )
    assert resource_violation(p, a, "", "ResourceQuota", "infra") == (
        "resource :ResourceQuota is not permitted in project infra"
    )
    assert resource_violation(p, a, "networking.istio.io", "VirtualService", "infra") is None
    assert resource_violation(p, a, "networking.istio.io", "VirtualService", "kube-system") == (
        "namespace kube-system is not permitted in project 'infra'"
    )
    # No cluster whitelist: only namespaced resources (the seed's `namespaces` project).
    assert resource_violation(project(), a, "", "Namespace", None) == (
        "resource :Namespace is not permitted in project infra"
    )
    # An explicitly empty namespace whitelist allows no namespaced kind at all.
    none = project(namespaceResourceWhitelist=[])
    assert resource_violation(none, a, "", "Service", "infra") is not None
