"""Every analyzer, proved by a small mesh a user could write: each fixture lists the exact
diagnostics (line, severity, field, message) that loading plus `analyze` must produce."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshpilot.analysis import ANALYZERS, analyze
from meshpilot.config.diagnostics import Severity
from meshpilot.config.loader import load_paths
from meshpilot.model.push_context import build_push_context
from tests.unit.validation.expectations import assert_diagnostics, fixtures_in

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[3]


def _diagnostics(paths: list[Path]) -> list:
    loaded = load_paths(paths)
    return [*loaded.diagnostics, *analyze(build_push_context(loaded.served, loaded.mesh))]


@pytest.mark.parametrize("fixture", fixtures_in(FIXTURES), ids=lambda p: p.stem)
def test_fixture_produces_exactly_its_expected_diagnostics(fixture: Path) -> None:
    assert_diagnostics(fixture, _diagnostics([fixture]))


def test_bookinfo_is_clean() -> None:
    assert _diagnostics([REPO / "examples" / "bookinfo"]) == []


@pytest.mark.parametrize(
    "inputs", sorted((REPO / "tests/unit/golden/inputs").glob("*.yaml")), ids=lambda p: p.stem
)
def test_golden_inputs_have_no_errors(inputs: Path) -> None:
    assert [d for d in _diagnostics([inputs]) if d.severity is Severity.ERROR] == []


def test_results_are_sorted_and_deduplicated() -> None:
    for fixture in fixtures_in(FIXTURES):
        loaded = load_paths([fixture])
        found = analyze(build_push_context(loaded.served, loaded.mesh))
        assert found == sorted(set(found), key=lambda d: d.sort_key())


def test_every_analyzer_is_exercised_by_a_fixture() -> None:
    silent = {a.__name__ for a in ANALYZERS}
    for fixture in fixtures_in(FIXTURES):
        loaded = load_paths([fixture])
        push = build_push_context(loaded.served, loaded.mesh)
        silent -= {a.__name__ for a in ANALYZERS if list(a(push))}
    assert silent == set()


def test_a_failing_analyzer_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(push: object) -> list[object]:
        raise KeyError("boom")

    import meshpilot.analysis as analysis

    monkeypatch.setattr(analysis, "ANALYZERS", (broken, *analysis.ANALYZERS))
    loaded = load_paths([REPO / "examples" / "bookinfo"])
    [diag] = analysis.analyze(build_push_context(loaded.served, loaded.mesh))
    assert diag.message == "internal error in broken (KeyError: 'boom'); please report"
