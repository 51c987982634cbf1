"""`meshpilot analyze -n NS` and `-A`, as istioctl: every object is read, findings on other
namespaces' objects are dropped; and every example under examples/ analyzes clean (exit 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from meshpilot.cli.main import cli
from tests.conftest import REPO

TYPO = (
    "apiVersion: networking.istio.io/v1\nkind: VirtualService\n"
    "metadata: {{name: typo, namespace: {ns}}}\n"
    "spec:\n  hosts: [ratings.example]\n"
    "  http:\n  - route:\n    - destination: {{host: ratingz}}\n"
)
EXAMPLES = sorted(p for p in (REPO / "examples").iterdir() if p.is_dir())
# How each example is analyzed: gitops/'s mesh config names no namespace (its Application
# delivers it into `shop`), so it is analyzed as istioctl would be, with -n shop.
EXAMPLE_ARGS = {"gitops": ("-n", "shop")}


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args), prog_name="meshpilot")
    assert "Traceback" not in result.output
    return result


@pytest.fixture
def two_namespaces(tmp_path: Path) -> str:
    (tmp_path / "vs.yaml").write_text(TYPO.format(ns="default") + "---\n" + TYPO.format(ns="shop"))
    return str(tmp_path)


def _objects(result: Result) -> list[str]:
    """The `Kind ns/name` of the objects the findings are on."""
    return sorted(
        {" ".join(line.split(" (", 1)[1].split()[:2]) for line in result.stdout.splitlines()}
    )


@pytest.mark.parametrize(
    ("args", "objects"),
    [
        ((), ["VirtualService default/typo", "VirtualService shop/typo"]),
        (("-A",), ["VirtualService default/typo", "VirtualService shop/typo"]),
        (("-n", "shop"), ["VirtualService shop/typo"]),
        (("--namespace", "default"), ["VirtualService default/typo"]),
        (
            ("-n", "shop", "--all-namespaces"),
            ["VirtualService default/typo", "VirtualService shop/typo"],
        ),
    ],
)
def test_namespace_selects_whose_findings_are_reported(
    two_namespaces: str, args: tuple[str, ...], objects: list[str]
) -> None:
    result = invoke("analyze", "-f", two_namespaces, *args)
    assert result.exit_code == 79
    assert _objects(result) == objects


def test_a_clean_namespace_says_so_and_exits_0(two_namespaces: str) -> None:
    result = invoke("analyze", "-f", two_namespaces, "-n", "payments")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr.endswith(
        f"\u2714 No validation issues found when analyzing files {two_namespaces} and "
        "namespace: payments.\n"
    )


def test_namespace_is_the_namespace_of_objects_that_name_none(tmp_path: Path) -> None:
    """istioctl's -n: a namespace-less VirtualService lands in it, next to its Service."""
    (tmp_path / "vs.yaml").write_text(
        TYPO.format(ns="x").replace(", namespace: x", "").replace("ratingz", "web")
        + "---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n"
        "spec:\n  ports: [{name: http, port: 80}]\n"
    )
    assert invoke("analyze", "-f", str(tmp_path)).exit_code == 79  # VS in default: host unknown
    assert _objects(invoke("analyze", "-f", str(tmp_path))) == ["VirtualService default/typo"]
    result = invoke("analyze", "-f", str(tmp_path), "-n", "shop")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_analyzes_without_errors(example: Path) -> None:
    result = invoke("analyze", "-f", str(example), *EXAMPLE_ARGS.get(example.name, ("-A",)))
    assert result.exit_code == 0, result.output
    assert [line for line in result.stdout.splitlines() if line.startswith("Error")] == []
