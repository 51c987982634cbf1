"""Golden text and JSON of `meshpilot explain` for the paths in cases.yaml over bookinfo.

Refresh with REFRESH_GOLDEN=1 (then read the diff); a golden without a case fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from meshpilot.cli.main import cli

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
GOLDEN = HERE / "golden"
CASES: dict[str, dict[str, Any]] = yaml.safe_load((HERE / "cases.yaml").read_text())


def run_explain(case: dict[str, Any], output: str) -> str:
    args = ["explain", "-f", "examples/bookinfo"]
    for extra in case.get("inputs", []):
        args += ["-f", str((HERE / "inputs" / extra).relative_to(ROOT))]
    if "pod" in case:
        args += ["--pod", case["pod"]]
    else:
        args += ["--from", case["from"]] if "from" in case else ["--gateway", case["gateway"]]
        for header in case.get("headers", []):
            args += ["-H", header]
        args += ["-o", output, case["url"]]
    cwd = os.getcwd()
    os.chdir(ROOT)  # file names in the output are relative, as a user types them
    try:
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    return result.stdout


# `--pod` prints text only.
RUNS = [(name, "text") for name in sorted(CASES)] + [
    (name, "json") for name in sorted(CASES) if "pod" not in CASES[name]
]


@pytest.mark.parametrize(("name", "output"), RUNS)
def test_golden(name: str, output: str) -> None:
    got = run_explain(CASES[name], output)
    path = GOLDEN / f"{name}.{'txt' if output == 'text' else 'json'}"
    if os.environ.get("REFRESH_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(got)
    assert path.exists(), f"no golden {path.name}: run with REFRESH_GOLDEN=1"
    assert got == path.read_text()
    if output == "json":
        assert json.loads(got)["schema"] == "meshpilot.io/explain/v1"


def test_no_stale_goldens() -> None:
    names = {p.name.rsplit(".", 1)[0] for p in GOLDEN.iterdir()}
    assert names <= set(CASES), f"goldens without a case: {sorted(names - set(CASES))}"
