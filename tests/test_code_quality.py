"""Repository rules that are checked, not hoped for: lint, types, imports, environment reads."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SRC = REPO / "src" / "meshpilot"
BIN = Path(sys.executable).parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=False)


def test_ruff_clean() -> None:
    result = _run(str(BIN / "ruff"), "check", "src", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_clean() -> None:
    result = _run(str(BIN / "mypy"), "--no-error-summary")
    assert result.returncode == 0, result.stdout + result.stderr


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _modules(package: str) -> list[Path]:
    return sorted((SRC / package).rglob("*.py"))


@pytest.mark.parametrize("path", _modules("model"), ids=lambda p: str(p.relative_to(SRC)))
def test_model_imports_no_protobuf(path: Path) -> None:
    # xds.names is plain string functions (Istio keeps BuildSubsetKey in model too).
    bad = {
        m
        for m in _imports(path)
        if m.startswith(("envoy", "google.protobuf", "meshpilot.xds"))
        and m != "meshpilot.xds.names"
    }
    assert not bad, f"model/ must stay free of protobuf and xds: {sorted(bad)}"


@pytest.mark.parametrize("path", _modules("xds/generate"), ids=lambda p: str(p.relative_to(SRC)))
def test_generators_never_import_the_server_or_grpc(path: Path) -> None:
    forbidden = ("grpc", "meshpilot.xds.server", "meshpilot.xds.connection")
    bad = {m for m in _imports(path) if m.startswith(forbidden)}
    assert not bad, f"generators reach nothing of the ADS server: {sorted(bad)}"


def test_environment_is_read_only_in_settings_and_cli() -> None:
    readers = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if "os.environ" in p.read_text() or "getenv(" in p.read_text()
    ]
    allowed = [r for r in readers if r == "settings.py" or r.startswith("cli/")]
    assert readers == allowed, f"os.environ outside settings.py and cli/: {readers}"


def test_modules_stay_within_budget() -> None:
    over = [
        f"{p.relative_to(SRC)} ({n})"
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
    ]
    assert not over, f"modules over 400 lines (split by aspect): {over}"
