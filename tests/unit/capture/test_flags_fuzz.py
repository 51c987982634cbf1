"""Any flag values: `meshpilot iptables --dry-run` prints rules or a usage error naming the
problem, never a traceback; what it accepts always builds restore text for both families."""

from __future__ import annotations

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from meshpilot.cli.iptables import iptables

_VALUES = st.one_of(
    st.sampled_from(["", "*", "80", "0", "65536", "10.0.0.0/8", "fd00::/8", "x", " 1, 2,,"]),
    st.text(alphabet="0123456789abcdef.:/,* -", max_size=24),
)
_OPTIONS = st.sampled_from(
    ["-p", "-z", "-e", "-u", "-g", "-m", "-b", "-d", "-i", "-x", "-q", "-o", "-c", "-k", "-t", "-r",
     "--outbound-owner-groups", "--outbound-owner-groups-exclude",
     "--outbound-ipv4-loopback-cidr"]
)  # fmt: skip
_SWITCHES = st.lists(
    st.sampled_from(["--dual-stack", "--redirect-dns", "--capture-all-dns", "--drop-invalid"]),
    unique=True,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_OPTIONS, _VALUES), max_size=5), _SWITCHES)
def test_any_flags_give_rules_or_a_usage_error(
    pairs: list[tuple[str, str]], switches: list[str]
) -> None:
    args = [word for pair in pairs for word in pair] + switches
    result = CliRunner().invoke(iptables, [*args, "--resolv-conf", "/nonexistent", "--dry-run"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 0:
        assert result.output.startswith("* nat\n") or result.output.startswith("* mangle\n")
        assert result.output.endswith("COMMIT\n")
        if "--dual-stack" in switches:
            assert "::1/128" in result.output
    else:
        assert "Error:" in result.output
