"""Deployments in the live store, as `meshpilot run` and `rollout restart` need them: apply,
get and delete work on them, unknown fields are kept, a bad replica count is refused."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from meshpilot.cli.main import cli

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: web:1, command: [python3, -m, http.server]}
"""


def run(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"MESHPILOT_STORE": str(store)})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_deployment_apply_get_delete(tmp_path: Path) -> None:
    path = tmp_path / "web.yaml"
    path.write_text(DEPLOYMENT)
    store = tmp_path / "live"
    assert run(store, "apply", "-f", str(path))[:2] == (0, "deployment.apps/web created\n")
    code, out, _ = run(store, "get", "deploy")
    assert code == 0
    assert out.split() == ["NAME", "REPLICAS", "AGE", "web", "2", out.split()[-1]]
    code, out, _ = run(store, "get", "deployment", "web", "-o", "yaml")
    assert code == 0
    assert "strategy:\n    type: RollingUpdate" in out  # fields run does not read are kept
    assert "command:\n        - python3" in out
    assert run(store, "delete", "deployment", "web")[:2] == (0, 'deployment.apps "web" deleted\n')


def test_negative_replicas_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "web.yaml"
    path.write_text(DEPLOYMENT.replace("replicas: 2", "replicas: -1"))
    code, _, err = run(tmp_path / "live", "apply", "-f", str(path))
    assert code != 0
    assert f"{path}:" in err and "spec.replicas" in err, err
