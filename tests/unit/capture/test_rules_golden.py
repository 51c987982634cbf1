"""`meshpilot iptables --dry-run` for each golden flag set equals the reviewed rules, which
follow current istio-iptables' output for the same flags (its testdata/*.golden)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from meshpilot.cli.iptables import iptables
from tests.unit.capture.cases import GOLDEN_DIR, CaptureCase, check_golden, load_cases

CASES = load_cases()


def dry_run(*args: str) -> str:
    result = CliRunner().invoke(iptables, [*args, "--dry-run"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_dry_run_matches_golden(case: CaptureCase) -> None:
    check_golden(case.expected("rules"), dry_run(*case.args))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_deterministic(case: CaptureCase) -> None:
    assert dry_run(*case.args) == dry_run(*case.args)


def test_no_stale_goldens() -> None:
    names = {c.name for c in CASES}
    stale = [
        p.name
        for p in GOLDEN_DIR.iterdir()
        if p.suffix in (".rules", ".save") and p.stem not in names
    ]
    assert not stale, f"golden files without a .flags case: {stale}"


def test_article_command_redirects_all_but_the_proxy_ports() -> None:
    """The seed article's command, read rule by rule (spec §2.2)."""
    rules = dry_run(*CASES[[c.name for c in CASES].index("article")].args).splitlines()
    assert rules[0] == "* nat" and rules[-1] == "COMMIT"
    assert "-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001" in rules
    assert "-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006" in rules
    excluded = [r for r in rules if r.startswith("-A ISTIO_INBOUND") and r.endswith("RETURN")]
    assert [r.split("--dport ")[1].split()[0] for r in excluded] == [
        "15008",
        "15090",
        "15020",
        "15021",
    ]
    output = [r for r in rules if r.startswith("-A ISTIO_OUTPUT")]
    assert output[0] == "-A ISTIO_OUTPUT -o lo -s 127.0.0.6/32 -j RETURN"
    assert output[-1] == "-A ISTIO_OUTPUT -j ISTIO_REDIRECT"
