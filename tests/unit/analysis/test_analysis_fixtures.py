"""Every analyzer, proved by a small mesh a user could write: each fixture lists the exact
diagnostics (line, severity, field, message) that loading plus `analyze` must produce."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from meshpilot.analysis import ANALYZERS, analyze
from meshpilot.analysis.load_findings import coded_load_diagnostics
from meshpilot.analysis.messages import MESSAGES
from meshpilot.config.diagnostics import Severity
from meshpilot.config.loader import load_paths, load_text
from meshpilot.model.push_context import build_push_context
from tests.unit.validation.expectations import assert_diagnostics, expected_in, fixtures_in

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[3]
# The codes issue 25 asks analyze to report, each with a fixture.
REQUIRED = [
    "IST0002",
    "IST0101",
    "IST0102",
    "IST0103",
    "IST0104",
    "IST0106",
    "IST0107",
    "IST0108",
    "IST0109",
    "IST0110",
    "IST0111",
    "IST0112",
    "IST0113",
    "IST0116",
    "IST0118",
    "IST0122",
    "IST0123",
    "IST0125",
    "IST0127",
    "IST0128",
    "IST0129",
    "IST0130",
    "IST0131",
    "IST0132",
    "IST0134",
    "IST0135",
    "IST0145",
    "IST0162",
    "IST0173",
    "IST0174",
]


def _diagnostics(paths: list[Path]) -> list:
    """What `meshpilot analyze` reports: loading's problems under their codes, then the
    analyzers' findings."""
    loaded = load_paths(paths)
    return [
        *coded_load_diagnostics(loaded.diagnostics),
        *analyze(build_push_context(loaded.served, loaded.mesh)),
    ]


@pytest.mark.parametrize("fixture", fixtures_in(FIXTURES), ids=lambda p: p.stem)
def test_fixture_produces_exactly_its_expected_diagnostics(fixture: Path) -> None:
    assert_diagnostics(fixture, _diagnostics([fixture]))


def test_bookinfo_has_no_errors_and_one_known_warning() -> None:
    # The egress example originates TLS without caCertificates, as the seed article does:
    # Istio warns about that too.
    found = _diagnostics([REPO / "examples" / "bookinfo"])
    assert [(Path(d.file).name, d.line, d.code) for d in found] == [("egress.yaml", 140, "IST0129")]


def test_gitops_example_as_delivered_has_no_errors() -> None:
    # mesh-config/ is delivered into namespace shop by the Application (argocd/), next to
    # the workloads a runtime registers (workloads.yaml).
    example = REPO / "examples" / "gitops"
    delivered = []
    for path in sorted((example / "mesh-config").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            doc["metadata"]["namespace"] = "shop"
            delivered.append(doc)
    loaded = load_paths([example / "workloads.yaml"])
    rest = load_text(yaml.safe_dump_all(delivered), "mesh-config.yaml")
    push = build_push_context([*loaded.served, *rest.served], loaded.mesh)
    found = [*loaded.diagnostics, *rest.diagnostics, *analyze(push)]
    assert [d for d in found if d.severity is Severity.ERROR] == []
    assert [d.code for d in found] == ["IST0102"]  # namespace shop has no injection label


def test_every_istio_code_is_proved_by_a_fixture() -> None:
    expected = {
        e.message[1:8]
        for f in fixtures_in(FIXTURES)
        for e in expected_in(f)
        if e.message[:4] == "[IST"
    }
    assert {code for code in MESSAGES if code.startswith("IST")} - expected == {"IST0001"}
    assert set(REQUIRED) <= expected


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
    [diag] = [
        d
        for d in analysis.analyze(build_push_context(loaded.served, loaded.mesh))
        if d.code == "IST0001"
    ]
    assert diag.message == "internal error in broken (KeyError: 'boom'); please report"
