"""Every validation rule, proved by a fixture a user could write: each fixture lists the exact
diagnostics (line, severity, field, message) it must produce, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshpilot.config.diagnostics import Severity
from meshpilot.config.loader import load_paths, load_text
from tests.unit.validation.expectations import assert_diagnostics, fixtures_in

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("fixture", fixtures_in(FIXTURES), ids=lambda p: p.stem)
def test_fixture_produces_exactly_its_expected_diagnostics(fixture: Path) -> None:
    assert_diagnostics(fixture, load_paths([fixture]).diagnostics)


def test_every_fixture_expects_something_or_says_it_is_valid() -> None:
    for fixture in fixtures_in(FIXTURES):
        text = fixture.read_text(encoding="utf-8")
        assert "#^ " in text or fixture.stem.startswith("valid-"), fixture.name


@pytest.mark.parametrize(
    "inputs",
    [REPO / "examples" / "bookinfo", *sorted((REPO / "tests/unit/golden/inputs").glob("*.yaml"))],
    ids=lambda p: p.stem,
)
def test_valid_examples_have_no_validation_errors(inputs: Path) -> None:
    errors = [d for d in load_paths([inputs]).diagnostics if d.severity is Severity.ERROR]
    assert errors == []


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        (100 * 1024, []),
        (100 * 1024 + 1, ["warning: large direct responses may impact control plane performance"]),
        (1024 * 1024 + 1, ["error: direct response body must be less than 1MB"]),
    ],
)
def test_direct_response_body_size(size: int, expected: list[str]) -> None:
    text = (
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\n"
        "metadata: {name: big, namespace: shop}\nspec:\n  hosts: [cart]\n  http:\n"
        f"  - directResponse: {{status: 200, body: {{string: {'x' * size}}}}}\n"
    )
    found = [f"{d.severity.value}: {d.message}" for d in load_text(text, "big.yaml").diagnostics]
    assert found == expected
    if expected:
        [diag] = load_text(text, "big.yaml").diagnostics
        assert (diag.line, diag.field) == (7, "spec.http[0].directResponse.body")
