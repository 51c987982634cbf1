"""`meshpilot analyze` as a user runs it, in istioctl's forms: findings on stdout, the summary
and closing line on stderr, json and yaml output, thresholds and exit codes, the live store,
Istio's suppressions, and translate --strict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from meshpilot.cli.main import cli
from tests.conftest import REPO

BOOKINFO = str(REPO / "examples" / "bookinfo")
EGRESS = str(REPO / "examples" / "bookinfo" / "egress.yaml")
PRODUCTPAGE = "productpage-v1-6b746f74dc-9stvs.default"
TYPO_VS = (
    "apiVersion: networking.istio.io/v1\nkind: VirtualService\n"
    "metadata:\n  name: ratings-typo\n  namespace: default\n{annotations}"
    "spec:\n  hosts: [ratings.example]\n"
    "  http:\n  - route:\n    - destination: {{host: ratingz}}\n"
)
FINDING = 'Referenced host not found: "ratingz"'
DOCS = "https://istio.io/latest/docs/reference/config/analysis"


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
    assert result.exit_code == 79  # istioctl's ExitAnalyzerFoundIssues
    assert result.stdout.splitlines() == [
        f"Error [IST0101] (VirtualService default/ratings-typo {typo}:10) {FINDING}",
        f"Warning [IST0129] (DestinationRule default/originate-tls-for-httpbin {EGRESS}:140) "
        "DestinationRule default/originate-tls-for-httpbin in namespace default has TLS mode "
        "set to SIMPLE but no caCertificates are set to validate server identity for host: "
        "httpbin.example.com at port number:443",
    ]
    assert result.stderr == (
        "36 objects checked: 1 error, 1 warning, 0 info\n"
        f"Error: Analyzers found issues when analyzing files {BOOKINFO}, {typo}.\n"
        f"See {DOCS} for more information about causes and resolutions.\n"
    )
    clean = invoke("analyze", "-f", BOOKINFO, "--output-threshold", "Error")
    assert clean.exit_code == 0 and clean.stdout == ""
    assert clean.stderr == (
        "35 objects checked: 0 errors, 0 warnings, 0 info\n"
        f"\u2714 No validation issues found when analyzing files {BOOKINFO}.\n"
    )


def test_two_errors_are_plural(typo: Path, tmp_path: Path) -> None:
    second = tmp_path / "vs2.yaml"
    second.write_text(typo.read_text().replace("ratings", "reviews"))
    result = invoke("analyze", "-f", BOOKINFO, "-f", str(typo), "-f", str(second))
    assert ": 2 errors, 1 warning, 0 info\n" in result.stderr


def test_json_and_yaml_have_istioctls_keys_and_the_field(typo: Path) -> None:
    result = invoke("analyze", "-f", BOOKINFO, "-f", str(typo), "-o", "json")
    assert result.exit_code == 0  # istioctl sets the exit code with the log output only
    expected = {
        "code": "IST0101",
        "documentationUrl": f"{DOCS}/ist0101/",
        "level": "Error",
        "message": FINDING,
        "origin": "VirtualService default/ratings-typo",
        "reference": f"{typo}:10",
        "field": "spec.http[0].route[0].destination.host",
    }
    rows = json.loads(result.stdout)
    assert rows[0] == expected and [r["code"] for r in rows] == ["IST0101", "IST0129"]
    assert list(rows[0]) == sorted(expected)  # Go writes a map's keys sorted
    as_yaml = invoke("analyze", "-f", BOOKINFO, "-f", str(typo), "-o", "yaml")
    assert yaml.safe_load(as_yaml.stdout)[0] == expected
    quiet = invoke("analyze", "-f", BOOKINFO, "-o", "json", "--output-threshold", "Error")
    assert json.loads(quiet.stdout) == []


@pytest.mark.parametrize(
    ("args", "code", "shown"),
    [
        ((), 0, ["IST0129"]),
        (("--failure-threshold", "Warning"), 79, ["IST0129"]),
        (("--failure-threshold", "info", "--output-threshold", "warning"), 79, ["IST0129"]),
        (("--output-threshold", "Error"), 0, []),
        (("--failure-threshold", "Warning", "--output-threshold", "Error"), 79, []),
    ],
)
def test_thresholds_decide_what_is_shown_and_the_exit_code(
    args: tuple[str, ...], code: int, shown: list[str]
) -> None:
    result = invoke("analyze", "-f", BOOKINFO, *args)
    assert result.exit_code == code
    assert [line.split()[1][1:-1] for line in result.stdout.splitlines()] == shown


def test_unparseable_input_exits_65_and_wrong_options_64(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [unclosed\n")
    result = invoke("analyze", "-f", BOOKINFO, "-f", str(broken))
    assert result.exit_code == 65  # istioctl's ExitDataError: no finding, a file unparsed
    assert result.stdout.startswith(f"Error [MP0001] ({broken}:2) invalid YAML: ")
    assert result.stderr.endswith("Error: Some files couldn't be parsed.\n")
    assert invoke("analyze", "-f", BOOKINFO, "-o", "table").exit_code == 64
    assert invoke("analyze", "-f", BOOKINFO, "--failure-threshold", "Fatal").exit_code == 64
    assert invoke("analyze").exit_code == 64  # neither files nor a store nor a control plane


def test_store_is_analyzed_alone_or_with_files_applied_on_top(typo: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert invoke("apply", "-f", BOOKINFO, "--store", store).exit_code == 0
    clean = invoke("analyze", "--store", store)
    assert clean.exit_code == 0, clean.output
    assert clean.stderr.startswith("35 objects checked: 0 errors")
    overlay = invoke("analyze", "--store", store, "-f", str(typo))
    assert overlay.exit_code == 79 and FINDING in overlay.stdout
    assert f"when analyzing store {store} and files {typo}." in overlay.stderr
    assert invoke("apply", "-f", str(typo), "--store", store).exit_code == 0
    live = invoke("analyze", "--store", store)
    assert live.exit_code == 79 and FINDING in live.stdout
    assert str(tmp_path / "store") in live.stdout  # the file is the stored object's
    missing = invoke("analyze", "--store", str(tmp_path / "nowhere"))
    assert missing.exit_code == 1 and missing.stderr.startswith("Error: ")
    assert not (tmp_path / "nowhere").exists()


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
    assert (result.exit_code, FINDING in result.stdout) == ((0, False) if hidden else (79, True))


def test_suppress_short_flag_and_meshpilot_codes(typo: Path) -> None:
    result = invoke(
        "analyze", "-f", BOOKINFO, "-f", str(typo), "-S", "IST0129=DestinationRule *.default",
        "-S", "IST0101=VirtualService ratings-typo.default", "-S", "IST9999=Pod x.y",
    )  # fmt: skip
    assert (result.exit_code, result.stdout) == (0, "")
    assert result.stderr.startswith(
        "Warning: Supplied message code 'IST9999' is an unknown message code and will not "
        "have any effect.\n"
    )


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
