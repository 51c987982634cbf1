"""`meshpilot rollout restart|status` on the live store, as kubectl's."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from meshpilot.cli.main import cli
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.store.open import open_store

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}, annotations: {team: a}}
    spec:
      containers: [{name: web, command: [sleep, "60"]}]
"""


def run(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={"MESHPILOT_STORE": str(store)})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_restart_sets_restarted_at_in_the_template(tmp_path: Path) -> None:
    (tmp_path / "web.yaml").write_text(DEPLOYMENT)
    store = tmp_path / "live"
    assert run(store, "apply", "-f", str(tmp_path / "web.yaml"))[0] == 0
    code, out, err = run(store, "rollout", "restart", "deployment/web", "-n", "shop")
    assert (code, out) == (0, "deployment.apps/web restarted\n"), err
    manifest = open_store(str(store), create=False).manifest(
        ConfigKey(Kind.DEPLOYMENT, "shop", "web")
    )
    assert manifest is not None
    annotations = manifest["spec"]["template"]["metadata"]["annotations"]
    assert annotations["team"] == "a"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", annotations[
        "kubectl.kubernetes.io/restartedAt"])  # fmt: skip


def test_restart_of_a_missing_or_misnamed_deployment(tmp_path: Path) -> None:
    (tmp_path / "web.yaml").write_text(DEPLOYMENT)
    store = tmp_path / "live"
    run(store, "apply", "-f", str(tmp_path / "web.yaml"))
    code, _, err = run(store, "rollout", "restart", "deployment/api", "-n", "shop")
    assert code == 1 and 'deployments.apps "api" not found in namespace shop' in err
    code, _, err = run(store, "rollout", "restart", "web", "-n", "shop")
    assert code == 2 and "'web': expected deployment/NAME" in err


def test_status_waits_for_pods_of_the_current_template(tmp_path: Path) -> None:
    (tmp_path / "web.yaml").write_text(DEPLOYMENT)
    store = tmp_path / "live"
    run(store, "apply", "-f", str(tmp_path / "web.yaml"))
    code, out, err = run(store, "rollout", "status", "deployment/web", "-n", "shop",
                         "--timeout", "1")  # fmt: skip
    assert code == 1
    assert out == (
        'Waiting for deployment "web" rollout to finish: 0 out of 2 new replicas have been '
        "updated...\n"
    )
    assert "timed out waiting for the condition" in err
