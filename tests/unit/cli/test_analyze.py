"""`meshpilot analyze` as a user runs it: findings on stdout, the summary on stderr, json and
yaml output, the live store, Istio's suppressions, and translate --strict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from meshpilot.cli.main import cli
from tests.conftest import REPO

BOOKINFO = str(REPO / "examples" / "bookinfo")
PRODUCTPAGE = "productpage-v1-6b746f74dc-9stvs.default"
TYPO_VS = (
    "apiVersion: networking.istio.io/v1\nkind: VirtualService\n"
    "metadata:\n  name: ratings-typo\n  namespace: default\n{annotations}"
    "spec:\n  hosts: [ratings.example]\n"
    "  http:\n  - route:\n    - destination: {{host: ratingz}}\n"
)
FINDING = (
    "error IST0101: VirtualService default/ratings-typo: "
    'spec.http[0].route[0].destination.host: Referenced host not found: "ratingz"'
)


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args), prog_name="meshpilot")
    assert "Traceback" not in result.output
    return result


@pytest.fixture
def typo(tmp_path: Path) -> Path:
    path = tmp_path / "vs.yaml"
    path.write_text(TYPO_VS.format(annotations=""))
    return path


def test_findings_go_to_stdout_and_the_summary_to_stderr(typo: Path) -> None:
    result = invoke("analyze", "-f", BOOKINFO, "-f", str(typo))
    assert result.exit_code == 1
    assert result.stdout == f"{typo}:10: {FINDING}\n"
    assert result.stderr == "36 objects checked: 1 error, 0 warnings, 0 info\n"
    clean = invoke("analyze", "-f", BOOKINFO)
    assert clean.exit_code == 0 and clean.stdout == ""
    assert clean.stderr == "35 objects checked: 0 errors, 0 warnings, 0 info\n"


def test_two_errors_are_plural(typo: Path, tmp_path: Path) -> None:
    second = tmp_path / "vs2.yaml"
    second.write_text(typo.read_text().replace("ratings", "reviews"))
    result = invoke("analyze", "-f", BOOKINFO, "-f", str(typo), "-f", str(second))
    assert result.stderr.endswith(": 2 errors, 0 warnings, 0 info\n")


def test_json_and_yaml_give_code_level_file_line_object_field_message(typo: Path) -> None:
    result = invoke("analyze", "-f", BOOKINFO, "-f", str(typo), "-o", "json")
    assert result.exit_code == 1
    expected = {
        "code": "IST0101",
        "level": "Error",
        "file": str(typo),
        "line": 10,
        "object": "VirtualService default/ratings-typo",
        "field": "spec.http[0].route[0].destination.host",
        "message": 'Referenced host not found: "ratingz"',
    }
    assert json.loads(result.stdout) == [expected]
    as_yaml = invoke("analyze", "-f", BOOKINFO, "-f", str(typo), "-o", "yaml")
    assert yaml.safe_load(as_yaml.stdout) == [expected]
    assert json.loads(invoke("analyze", "-f", BOOKINFO, "-o", "json").stdout) == []


def test_store_is_analyzed_alone_or_with_files_applied_on_top(typo: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert invoke("apply", "-f", BOOKINFO, "--store", store).exit_code == 0
    clean = invoke("analyze", "--store", store)
    assert clean.exit_code == 0, clean.output
    assert clean.stderr.startswith("35 objects checked: 0 errors")
    overlay = invoke("analyze", "--store", store, "-f", str(typo))
    assert overlay.exit_code == 1 and FINDING in overlay.stdout
    assert invoke("apply", "-f", str(typo), "--store", store).exit_code == 0
    live = invoke("analyze", "--store", store)
    assert live.exit_code == 1 and FINDING in live.stdout
    assert str(tmp_path / "store") in live.stdout  # the file is the stored object's
    missing = invoke("analyze", "--store", str(tmp_path / "nowhere"))
    assert missing.exit_code == 1 and missing.stderr.startswith("Error: ")
    assert not (tmp_path / "nowhere").exists()
    assert invoke("analyze").exit_code == 2  # neither files nor a store


@pytest.mark.parametrize(
    ("rule", "hidden"),
    [
        ("IST0101=VirtualService ratings-typo.default", True),
        ("IST0101=VirtualService *.default", True),
        ("IST0101=VirtualService ratings-typo.other", False),
        ("IST0102=VirtualService ratings-typo.default", False),
        ("IST0101=DestinationRule ratings-typo.default", False),
    ],
)
def test_suppress_flag_matches_code_kind_and_name_glob(typo: Path, rule: str, hidden: bool) -> None:
    result = invoke("analyze", "-f", BOOKINFO, "-f", str(typo), "--suppress", rule)
    assert (result.exit_code, FINDING in result.stdout) == ((0, False) if hidden else (1, True))


def test_suppress_annotation_on_the_resource(tmp_path: Path) -> None:
    for value, hidden in (
        ("IST0101", True),
        ("IST0102, IST0101", True),
        ("*", True),
        ("IST0102", False),
    ):
        path = tmp_path / "vs.yaml"
        note = f"  annotations:\n    galley.istio.io/analyze-suppress: '{value}'\n"
        path.write_text(TYPO_VS.format(annotations=note))
        result = invoke("analyze", "-f", BOOKINFO, "-f", str(path))
        assert (FINDING in result.stdout) is not hidden, value


def test_bad_suppress_value_is_a_clear_error(typo: Path) -> None:
    result = invoke("analyze", "-f", str(typo), "--suppress", "IST0101")
    assert result.exit_code == 1
    assert "--suppress 'IST0101': expected CODE=KIND NAME[.NAMESPACE]" in result.stderr


def test_translate_strict_fails_on_analyzer_errors(typo: Path) -> None:
    lenient = invoke("translate", "-f", BOOKINFO, "-f", str(typo), "--proxy", PRODUCTPAGE)
    assert lenient.exit_code == 0
    strict = invoke(
        "translate", "-f", BOOKINFO, "-f", str(typo), "--proxy", PRODUCTPAGE, "--strict"
    )
    assert strict.exit_code == 1
    assert FINDING in strict.stderr
    assert "clusters" in json.loads(strict.stdout)
    clean = invoke("translate", "-f", BOOKINFO, "--proxy", PRODUCTPAGE, "--strict")
    assert clean.exit_code == 0
