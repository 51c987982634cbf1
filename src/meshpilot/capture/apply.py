"""Installing and removing capture with the real iptables/ip6tables and ip, in one namespace.

`apply_capture` is idempotent: per IP family it first removes whatever capture is installed
(every built-in-chain rule that jumps into an ISTIO_* chain, then the ISTIO_* chains
themselves, of every table, read from `iptables-save` and deleted in one iptables-restore
transaction), then loads the new rules with `iptables-restore --noflush`, which leaves other
rules alone. Rules our flags put into built-in chains without jumping into ISTIO_* chains
(-c, -k, TPROXY's marks) are deleted one by one if present. Then what is not iptables:
`::6` on lo (dual stack) and TPROXY's policy route, replaced if present.

Outside a namespace of our own this changes the machine's firewall, as istio-iptables does
inside a pod.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.capture.rules import (
    BUILTIN_CHAINS,
    ISTIO_CHAIN_PREFIX,
    NAT,
    TABLES,
    CaptureRules,
    Family,
    Rule,
    TproxyRoute,
)
from meshpilot.runtime.commands import in_netns, run

__all__ = [
    "IptablesTarget",
    "apply_capture",
    "cleanup_text",
    "nat_table",
    "remove_capture",
    "saved_tables",
]

MAX_DUPLICATES = 32  # deleting a rule repeatedly stops after this many copies
PASSTHROUGH_V6 = "::6/128"  # Envoy's IPv6 inbound passthrough source, added to lo
TOOLS = {
    Family.V4: ("iptables-save", "iptables-restore", "iptables"),
    Family.V6: ("ip6tables-save", "ip6tables-restore", "ip6tables"),
}


@dataclass(frozen=True, slots=True)
class IptablesTarget:
    """Where iptables runs: a named network namespace, or the current one (None)."""

    netns: str | None = None

    def argv(self, tool: str, *args: str) -> list[str]:
        return in_netns(self.netns, [tool, *args])


def saved_tables(target: IptablesTarget, family: Family = Family.V4, table: str = "") -> str:
    """`iptables-save` (or ip6tables-save) output, of one table when `table` is given."""
    args = ("-t", table) if table else ()
    return run(target.argv(TOOLS[family][0], *args)).stdout


def nat_table(target: IptablesTarget) -> str:
    """The IPv4 nat table as `iptables-save -t nat` prints it."""
    return saved_tables(target, Family.V4, NAT)


def apply_capture(rules: CaptureRules, target: IptablesTarget | None = None) -> None:
    """Replace any installed capture with `rules`."""
    target = target or IptablesTarget()
    remove_capture(target, rules)
    for family in rules.families:
        _restore(target, family, rules.restore_text(family))
    if Family.V6 in rules.families:
        _ip(target, "-6", "addr", "replace", PASSTHROUGH_V6, "dev", "lo")
    if rules.route is not None:
        for family in rules.families:
            _add_route(target, family, rules.route)


def remove_capture(target: IptablesTarget | None = None, rules: CaptureRules | None = None) -> None:
    """Remove the ISTIO_* chains and every jump into them in both families; with `rules`,
    also the rules those flags add to built-in chains without a jump, and the policy route."""
    target = target or IptablesTarget()
    for family in Family:
        if family is Family.V6 and not _has_ip6tables(target):
            continue
        text = cleanup_text(saved_tables(target, family))
        if text is not None:
            _restore(target, family, text)
    if rules is None:
        return
    for family in rules.families:
        for rule in rules.builtin_rules(family):
            if not rule.target.startswith(ISTIO_CHAIN_PREFIX):
                _delete_all(target, family, rule)
        if rules.route is not None:
            _delete_route(target, family, rules.route)


def cleanup_text(save_text: str) -> str | None:
    """iptables-restore input removing the capture found in `iptables-save` output (any
    tables), or None when there is none."""
    plans: dict[str, tuple[list[str], list[str]]] = {}
    table = ""
    for line in save_text.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
            continue
        chains, deletes = plans.setdefault(table, ([], []))
        if line.startswith(":" + ISTIO_CHAIN_PREFIX):
            chains.append(line[1:].split()[0])
            continue
        words = line.split()
        if len(words) < 4 or words[0] != "-A" or words[1] not in BUILTIN_CHAINS:
            continue
        if words[-2] in ("-j", "-g") and words[-1].startswith(ISTIO_CHAIN_PREFIX):
            deletes.append(" ".join(["-D", *words[1:]]))
    lines: list[str] = []
    for name in sorted(plans, key=lambda t: TABLES.index(t) if t in TABLES else len(TABLES)):
        chains, deletes = plans[name]
        if chains or deletes:
            lines += [f"*{name}", *deletes, *(f"-F {c}" for c in chains)]
            lines += [*(f"-X {c}" for c in chains), "COMMIT"]
    return "\n".join(lines) + "\n" if lines else None


def _has_ip6tables(target: IptablesTarget) -> bool:
    """False where the kernel has no IPv6 (ip6tables-save fails): nothing to remove there."""
    return run(target.argv(TOOLS[Family.V6][0], "-t", NAT), check=False).returncode == 0


def _restore(target: IptablesTarget, family: Family, text: str) -> None:
    run(target.argv(TOOLS[family][1], "--noflush", "--wait"), input_text=text)


def _delete_all(target: IptablesTarget, family: Family, rule: Rule) -> None:
    """Delete every copy of `rule`; iptables exits 1 once none is left."""
    tool = TOOLS[family][2]
    argv = target.argv(tool, "--wait", "-t", rule.table, "-D", rule.chain, *rule.params)
    for _ in range(MAX_DUPLICATES):
        result = run(argv, check=False)
        if result.returncode == 1:
            return
        if result.returncode != 0:
            run(argv)  # raises CommandError with iptables' message


def _ip(target: IptablesTarget, *args: str, check: bool = True) -> int:
    return run(target.argv("ip", *args), check=check).returncode


def _add_route(target: IptablesTarget, family: Family, route: TproxyRoute) -> None:
    """`ip rule add fwmark M lookup T` and `ip route add local default dev lo table T`."""
    version = "-4" if family is Family.V4 else "-6"
    _delete_route(target, family, route)
    _ip(target, version, "rule", "add", "fwmark", str(route.mark), "lookup", str(route.table))
    _ip(
        target,
        version,
        "route",
        "replace",
        "local",
        "default",
        "dev",
        "lo",
        "table",
        str(route.table),
    )


def _delete_route(target: IptablesTarget, family: Family, route: TproxyRoute) -> None:
    version = "-4" if family is Family.V4 else "-6"
    rule = ("rule", "del", "fwmark", str(route.mark), "lookup", str(route.table))
    for _ in range(MAX_DUPLICATES):
        if _ip(target, version, *rule, check=False) != 0:
            break
    _ip(target, version, "route", "flush", "table", str(route.table), check=False)
