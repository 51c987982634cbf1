"""Tenancy through the CLI: `apply` of Applications checks the project and RBAC (`--as`),
`gitops list/get` show only what the caller may see, with Argo CD's messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshpilot.cli.main import cli

SETUP = """apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-rbac-cm, namespace: argocd}
data:
  policy.default: role:none
  policy.csv: |
    p, role:app, *, *, app/*/*, allow
    p, role:infra, *, *, infra/*/*, allow
    g, app-team, role:app
    g, infra-team, role:infra
  scopes: "[groups]"
---
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: infra, namespace: argocd}
spec:
  sourceRepos: ['*']
  destinations:
  - {namespace: infra, server: https://foo-cluster.example.com}
---
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: app, namespace: argocd}
spec:
  sourceRepos: ['*']
  destinations:
  - {namespace: app, server: https://foo-cluster.example.com}
"""

APP = """apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {{name: {name}, namespace: argocd}}
spec:
  project: {project}
  source: {{repoURL: https://github.com/myorg/infra, path: monitoring}}
  destination: {{server: https://foo-cluster.example.com, namespace: {namespace}}}
"""


@pytest.fixture
def run(tmp_path: Path):  # type: ignore[no-untyped-def]
    runner = CliRunner()
    env = {"MESHPILOT_STORE": str(tmp_path / "live")}

    def invoke(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(cli, list(args), env=env)
        return result.exit_code, result.stdout, result.stderr

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "setup.yaml").write_text(SETUP)
    assert invoke("apply", "-f", str(tmp_path / "in" / "setup.yaml"))[0] == 0
    return invoke


def write_app(tmp_path: Path, name: str, project: str, namespace: str) -> str:
    path = tmp_path / "in" / f"{name}.yaml"
    path.write_text(APP.format(name=name, project=project, namespace=namespace))
    return str(path)


def test_infra_team_deploys_to_its_project(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_app(tmp_path, "monitoring", "infra", "infra")
    code, out, _ = run("apply", "-f", path, "--as", "ina", "--groups", "infra-team")
    assert (code, out) == (0, "application.argoproj.io/monitoring created\n")


def test_mistaken_operations_are_refused_with_argo_cd_messages(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    as_infra = ("--as", "ina", "--groups", "infra-team")
    code, _, err = run("apply", "-f", write_app(tmp_path, "a1", "app", "app"), *as_infra)
    assert (code, err) == (1, "Error: permission denied: applications, create, app/a1, sub: ina\n")
    code, _, err = run("apply", "-f", write_app(tmp_path, "a2", "infra", "app"), *as_infra)
    assert (code, err) == (
        1,
        "Error: application destination {https://foo-cluster.example.com app} "
        "is not permitted in project 'infra'\n",
    )
    code, _, err = run("apply", "-f", write_app(tmp_path, "a3", "nope", "infra"))
    assert err == "Error: Application referencing project nope which does not exist\n"
    assert run("get", "app", "-n", "argocd")[2] == "No resources found in argocd namespace.\n"


def test_list_and_get_show_only_permitted_apps(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run("apply", "-f", write_app(tmp_path, "monitoring", "infra", "infra"))
    run("apply", "-f", write_app(tmp_path, "web", "app", "app"))
    code, out, _ = run("gitops", "list", "-o", "name", "--as", "ina", "--groups", "infra-team")
    assert out == "argocd/monitoring\n"
    code, out, _ = run("gitops", "list", "-o", "name")  # the local operator sees everything
    assert out == "argocd/monitoring\nargocd/web\n"
    code, out, _ = run("gitops", "get", "monitoring", "-o", "json")
    app = json.loads(out)
    assert app["spec"]["project"] == "infra" and app["metadata"]["resourceVersion"]
    code, out, _ = run("gitops", "get", "argocd/monitoring")
    assert "Project:            infra" in out.splitlines()
    code, _, err = run("gitops", "get", "web", "--as", "ina", "--groups", "infra-team")
    assert err == "Error: permission denied: applications, get, app/web, sub: ina\n"
    code, _, err = run("gitops", "get", "nothing")
    assert (code, err) == (1, 'Error: applications.argoproj.io "nothing" not found\n')


def test_rbac_file_flag(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    policy = tmp_path / "policy.csv"
    policy.write_text("p, role:all, applications, *, */*, allow\ng, ops, role:all\n")
    path = write_app(tmp_path, "web", "app", "app")
    _, out, _ = run("apply", "-f", path, "--as", "o", "--groups", "ops", "--rbac", str(policy))
    assert out == "application.argoproj.io/web created\n"
    _, _, err = run("delete", "app", "web", "-n", "argocd", "--as", "ina", "--groups", "infra-team")
    assert err == "Error: permission denied: applications, delete, app/web, sub: ina\n"
