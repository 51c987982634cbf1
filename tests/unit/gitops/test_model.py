"""Application and AppProject models: Argo CD field names, refusals with the loader's
messages, and the status value sets and orders."""

from __future__ import annotations

from meshpilot.config.loader import load_text
from meshpilot.gitops.model import (
    Application,
    AppProject,
    HealthStatusCode,
    OperationPhase,
    register_gitops_kinds,
)

register_gitops_kinds()

APP = """apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: argocd}
spec:
  project: team-a
  source:
    repoURL: https://github.com/MyOrg/my-repo.git
    path: charts/shop
    targetRevision: v1.2.0
    helm:
      valueFiles: [values.yaml, values-prod.yaml]
      values: |
        replicas: 2
      parameters: [{name: image.tag, value: "1.0"}]
      releaseName: shop
  destination: {server: https://kubernetes.default.svc, namespace: shop}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
    syncOptions: [CreateNamespace=true, PruneLast=true]
    retry: {limit: 3, backoff: {duration: 5s, factor: 2, maxDuration: 1m}}
  revisionHistoryLimit: 5
  ignoreDifferences:
  - {group: networking.istio.io, kind: VirtualService, jsonPointers: [/spec/http/0/route]}
status:
  sync: {status: Synced, revision: 3f2a9c1}
  health: {status: Healthy}
  operationState: {phase: Succeeded, message: successfully synced}
  history: [{id: 1, revision: 3f2a9c1}]
"""


def test_application_fields_use_argo_cd_names() -> None:
    loaded = load_text(APP, "app.yaml")
    assert loaded.diagnostics == []
    app = loaded.objects[0].model
    assert isinstance(app, Application)
    assert app.spec.project_name == "team-a"
    source = app.spec.all_sources[0]
    assert source.repo_url == "https://github.com/MyOrg/my-repo.git"
    assert source.helm is not None and source.helm.value_files == [
        "values.yaml",
        "values-prod.yaml",
    ]
    assert source.helm.parameters[0].name == "image.tag"
    assert app.spec.sync_policy is not None and app.spec.sync_policy.is_automated
    assert app.spec.sync_policy.option("CreateNamespace") == "true"
    assert app.spec.destination.is_in_cluster
    assert app.status.operation_state is not None
    assert app.status.operation_state.phase.successful


def test_unknown_field_is_refused_with_file_line_object_field() -> None:
    text = APP.replace("  syncPolicy:\n", "  syncPolicyy:\n")
    messages = [str(d) for d in load_text(text, "app.yaml").diagnostics]
    assert messages == [
        "app.yaml:17: error: Application argocd/shop: spec.syncPolicyy: unknown field 'syncPolicyy'"
    ]


def test_destination_with_name_and_server_is_refused() -> None:
    text = APP.replace(
        "destination: {server: https://kubernetes.default.svc, namespace: shop}",
        "destination: {server: https://kubernetes.default.svc, name: in-cluster, namespace: shop}",
    )
    messages = [d.message for d in load_text(text, "app.yaml").diagnostics]
    assert messages == [
        "application destination can't have both name and server defined: "
        "in-cluster https://kubernetes.default.svc"
    ]


def test_app_project_fields() -> None:
    text = """apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: infra, namespace: foo}
spec:
  sourceRepos: ['*']
  destinations: [{namespace: infra, server: https://foo-cluster.example.com}]
  sourceNamespaces: [foo]
  clusterResourceWhitelist: [{group: '', kind: Namespace}]
  namespaceResourceBlacklist: [{group: '', kind: ResourceQuota}]
  syncWindows: [{kind: deny, schedule: '0 22 * * *', duration: 1h, applications: ['*']}]
  roles: [{name: ci, policies: ['p, proj:infra:ci, applications, sync, infra/*, allow']}]
"""
    loaded = load_text(text, "p.yaml")
    assert loaded.diagnostics == []
    project = loaded.objects[0].model
    assert isinstance(project, AppProject)
    assert project.spec.namespace_resource_whitelist is None  # absent: every namespaced kind
    assert project.spec.sync_windows[0].kind == "deny"


def test_health_order_is_gitops_engines() -> None:
    order = [h.value for h in HealthStatusCode]
    assert order == ["Healthy", "Suspended", "Progressing", "Missing", "Degraded", "Unknown"]
    assert HealthStatusCode.DEGRADED.is_worse(HealthStatusCode.PROGRESSING)
    assert not HealthStatusCode.HEALTHY.is_worse(HealthStatusCode.SUSPENDED)
    assert (
        HealthStatusCode.worst([HealthStatusCode.HEALTHY, HealthStatusCode.MISSING])
        is HealthStatusCode.MISSING
    )


def test_operation_phases() -> None:
    assert [p for p in OperationPhase if p.completed] == [
        OperationPhase.FAILED,
        OperationPhase.ERROR,
        OperationPhase.SUCCEEDED,
    ]
    assert OperationPhase.TERMINATING.running and not OperationPhase.FAILED.successful
