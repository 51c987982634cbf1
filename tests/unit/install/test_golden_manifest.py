"""Goldens of `meshpilot manifest generate`: one folder per case (`args`, one argument per
line after a comment saying what the case proves, and maybe `iop.yaml`), the expected output
in `manifest.yaml`. CRDs appear in full only in `component-base`; elsewhere by name.
Refresh with `REFRESH_GOLDEN=1 pytest tests/unit/install`, then read the diff.

Every object of every case is checked against the Kubernetes OpenAPI schema of a current
release with kubernetes-validate (strict: unknown fields are errors)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from meshpilot import __version__
from meshpilot.cli.main import cli
from meshpilot.install.manifest import manifest_yaml

HERE = Path(__file__).parent / "golden"
CASES = sorted(p.name for p in HERE.iterdir() if p.is_dir())
REFRESH = os.environ.get("REFRESH_GOLDEN") == "1"
KUBERNETES = kubernetes_validate.latest_version()


def _generate(case: Path) -> str:
    lines = (case / "args").read_text().splitlines()
    args = [line for line in lines if line and not line.startswith("#")]
    args = [str(case / a) if a == "iop.yaml" else a for a in args]
    result = CliRunner().invoke(cli, ["manifest", "generate", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _stub_crds(docs: list[Any], keep: bool) -> list[Any]:
    if keep:
        return docs
    return [
        {
            "apiVersion": d["apiVersion"],
            "kind": d["kind"],
            "metadata": {"name": d["metadata"]["name"]},
        }
        if d["kind"] == "CustomResourceDefinition"
        else d
        for d in docs
    ]


@pytest.mark.parametrize("name", CASES)
def test_manifest_golden(name: str) -> None:
    case = HERE / name
    output = _generate(case)
    assert _generate(case) == output  # deterministic
    docs = [d for d in yaml.safe_load_all(output) if d is not None]
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
    assert "&id0" not in output  # no YAML anchors
    text = manifest_yaml(_stub_crds(docs, name == "component-base")).replace(__version__, "VERSION")
    golden = case / "manifest.yaml"
    if REFRESH:
        golden.write_text(text)
    assert golden.exists(), f"{golden} missing: run with REFRESH_GOLDEN=1 and review it"
    assert text == golden.read_text()


def test_no_stale_goldens() -> None:
    for case in CASES:
        assert (HERE / case / "args").exists(), f"golden folder {case} has no args"
