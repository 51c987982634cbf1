"""Secrets stay out of every preview output (SOPS values rendered through Helm are masked),
and the CLI's outputs and exit codes: 0 rendered fine, 1 bad commit, 2 usage."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from click.testing import CliRunner

from meshpilot.cli.main import cli
from meshpilot.gitops.preview import (
    Change,
    PreviewDeps,
    PreviewRequest,
    render_json,
    render_markdown,
    render_text,
    run_preview,
)
from meshpilot.gitops.render import Renderer, RendererConfig
from meshpilot.gitops.render.sops import load_identities
from meshpilot.gitops.repo import RepoService
from tests.gitops_fixtures import make_repo, new_age_key, sops_encrypt
from tests.unit.gitops.preview.mesh_fixtures import (
    WORKLOADS,
    application,
    branch,
    live_store,
    routing_repo,
    virtual_service,
)

OLD, NEW = "hunter2-old-value", "s3cr3t-new-value"
CHART = {
    "apps/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    "apps/web/values.yaml": "password: ''\n",
    "apps/web/templates/secret.yaml": (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: web-db\n"
        "stringData:\n  password: {{ .Values.password | quote }}\n"
    ),
}
WEB_APP = """\
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {{name: web, namespace: argocd}}
spec:
  source:
    repoURL: '{repo}'
    path: apps/web
    helm: {{valueFiles: [secrets.yaml]}}
  destination: {{server: 'https://kubernetes.default.svc', namespace: default}}
"""


def _leaks(text: str) -> list[str]:
    values = [OLD, NEW]
    values += [base64.b64encode(v.encode()).decode() for v in values]
    return [v for v in values if v in text]


def test_sops_secret_change_is_masked_everywhere(tmp_path: Path) -> None:
    key = new_age_key()
    secret = {"apps/web/secrets.yaml": sops_encrypt({"password": OLD}, [key.recipient])}
    repo = make_repo(tmp_path / "repo", {**CHART, **secret})
    # the Application lives in the repository itself (app-of-apps); no store at all
    repo.commit({"apps/web-app.yaml": WEB_APP.format(repo=repo.path)})
    new_secret = sops_encrypt({"password": NEW}, [key.recipient])
    branch(repo, "rotate", {"apps/web/secrets.yaml": new_secret})
    renderer = Renderer(
        RepoService(tmp_path / "cache"),
        RendererConfig(temp_dir=tmp_path, age_identities=load_identities(key_text=key.identity)),
    )
    report = run_preview(PreviewRequest(str(repo.path), "main", "rotate"), PreviewDeps(renderer))

    assert not report.failed
    (app,) = report.apps
    assert app.app == "argocd/web"
    (res,) = app.resources
    assert (res.key, res.change) == ("Secret/default/web-db", Change.CHANGED)
    masks = {line for line in res.diff.splitlines() if "password:" in line}
    assert masks == {"-  password: +++++++++", "+  password: ++++++++"}  # changed, not shown
    for output in (render_markdown(report), render_text(report), render_json(report)):
        assert _leaks(output) == []
    assert list(tmp_path.glob("meshpilot-*")) == []  # working trees removed


def _cli(tmp: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    runner = CliRunner()
    result = runner.invoke(
        cli,
        ["gitops", "preview", "--repo-cache", str(tmp / "cli-cache"), *args],
        env={"MESHPILOT_STORE": "", **(env or {})},
    )
    return result.exit_code, result.stdout, result.stderr


def test_cli_outputs_and_exit_codes(tmp_path: Path) -> None:
    repo = routing_repo(tmp_path / "repo")
    store = tmp_path / "store"
    live_store(store, WORKLOADS, application(repo.path))
    branch(repo, "shift", {"apps/routing/virtual-service.yaml": virtual_service(50, 50)})
    bad = virtual_service(50, 50, weight_key="wieght")
    branch(repo, "bad", {"apps/routing/virtual-service.yaml": bad})
    common = ["--repo", str(repo.path), "--base", "main", "--store", str(store)]

    code, out, _ = _cli(tmp_path, *common, "--head", "shift")
    assert code == 0
    assert out.startswith("### meshpilot preview: `main` ← `shift (")
    assert "weights v1 80→50, v2 20→50" in out

    code, out, _ = _cli(tmp_path, *common, "--head", "shift", "-o", "json")
    assert code == 0 and json.loads(out)["apps"][0]["app"] == "argocd/routing"

    code, out, _ = _cli(tmp_path, *common, "--head", "bad", "-o", "text")
    assert code == 1
    assert "FAILED" in out and "apps/routing/virtual-service.yaml:" in out

    code, _, err = _cli(tmp_path, *common, "--head", "no-such-branch")
    assert code == 1 and "unable to resolve 'no-such-branch'" in err and "Traceback" not in err

    code, _, err = _cli(tmp_path, *common, "--head", "shift", "--app", "nope")
    assert code == 2 and "--app" in err

    code, out, _ = _cli(tmp_path, *common, "--head", "shift", "--app", "routing", "-o", "text")
    assert code == 0 and "argocd/routing" in out
