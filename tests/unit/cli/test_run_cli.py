"""`meshpilot run` refuses what it cannot start before it starts anything."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from meshpilot.cli.main import cli

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: web, command: [sleep, "60"]}]
"""


def run(tmp_path: Path, *args: str) -> tuple[int, str]:
    env = {"MESHPILOT_STORE": str(tmp_path / "live")}
    result = CliRunner().invoke(cli, ["run", *args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stderr


def test_without_the_control_planes_root_nothing_runs(tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text(POD)
    (tmp_path / "ca").mkdir()
    code, err = run(tmp_path, "-f", str(tmp_path / "pod.yaml"), "--secure-uds",
                    str(tmp_path / "secure.sock"), "--ca-dir", str(tmp_path / "ca"))  # fmt: skip
    assert code == 1
    assert err == f"Error: {tmp_path / 'ca' / 'root-cert.pem'}: no mesh root (is --ca-dir the " \
        "control plane's?)\n"  # fmt: skip
    assert not (tmp_path / "live").exists()


def test_invalid_files_are_refused_naming_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(POD.replace("kind: Pod", "kind: Pod\nspec: [oops"))
    code, err = run(tmp_path, "-f", str(tmp_path / "bad.yaml"), "--secure-uds", "x")
    assert code == 1
    assert err.startswith("Error: nothing run:\n") and f"{tmp_path / 'bad.yaml'}:" in err, err
