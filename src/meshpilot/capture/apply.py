"""Installing and removing capture rules with the real iptables, in one network namespace.

`apply_capture` is idempotent: it first removes whatever capture is installed (every
built-in-chain rule that jumps into an ISTIO_* chain, then the ISTIO_* chains themselves,
read from `iptables-save -t nat` and deleted in one iptables-restore transaction), then
loads the new rules with `iptables-restore --noflush`, which leaves other rules alone.
Rules our flags put into built-in chains without jumping into ISTIO_* chains (-c, -k) are
deleted one by one if present.

Only the nat table of the target namespace is touched. Outside a namespace of our own this
changes the machine's firewall, as istio-iptables does inside a pod.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.capture.rules import (
    BUILTIN_CHAINS,
    ISTIO_CHAIN_PREFIX,
    NAT,
    CaptureRules,
    Rule,
)
from meshpilot.runtime.commands import in_netns, run

__all__ = ["IptablesTarget", "apply_capture", "cleanup_text", "nat_table", "remove_capture"]

MAX_DUPLICATES = 32  # deleting a rule repeatedly stops after this many copies


@dataclass(frozen=True, slots=True)
class IptablesTarget:
    """Where iptables runs: a named network namespace, or the current one (None)."""

    netns: str | None = None
    save: str = "iptables-save"
    restore: str = "iptables-restore"
    iptables: str = "iptables"

    def argv(self, tool: str, *args: str) -> list[str]:
        return in_netns(self.netns, [tool, *args])


def nat_table(target: IptablesTarget) -> str:
    """The nat table as `iptables-save -t nat` prints it."""
    return run(target.argv(target.save, "-t", NAT)).stdout


def apply_capture(rules: CaptureRules, target: IptablesTarget | None = None) -> None:
    """Replace any installed capture with `rules`."""
    target = target or IptablesTarget()
    remove_capture(target, rules)
    _restore(target, rules.restore_text())


def remove_capture(target: IptablesTarget | None = None, rules: CaptureRules | None = None) -> None:
    """Remove the ISTIO_* chains and every jump into them; with `rules`, also the rules
    those flags add to built-in chains without a jump (interface exclusions)."""
    target = target or IptablesTarget()
    text = cleanup_text(nat_table(target))
    if text is not None:
        _restore(target, text)
    if rules is not None:
        for rule in rules.builtin_rules():
            if not rule.target.startswith(ISTIO_CHAIN_PREFIX):
                _delete_all(target, rule)


def cleanup_text(save_text: str) -> str | None:
    """iptables-restore input removing the capture found in `iptables-save -t nat`
    output, or None when there is none."""
    chains: list[str] = []
    deletes: list[str] = []
    for line in save_text.splitlines():
        if line.startswith(":" + ISTIO_CHAIN_PREFIX):
            chains.append(line[1:].split()[0])
            continue
        words = line.split()
        if len(words) < 4 or words[0] != "-A" or words[1] not in BUILTIN_CHAINS:
            continue
        if words[-2] in ("-j", "-g") and words[-1].startswith(ISTIO_CHAIN_PREFIX):
            deletes.append(" ".join(["-D", *words[1:]]))
    if not chains and not deletes:
        return None
    lines = ["*nat", *deletes, *(f"-F {c}" for c in chains), *(f"-X {c}" for c in chains)]
    return "\n".join([*lines, "COMMIT"]) + "\n"


def _restore(target: IptablesTarget, text: str) -> None:
    run(target.argv(target.restore, "--noflush", "--wait"), input_text=text)


def _delete_all(target: IptablesTarget, rule: Rule) -> None:
    """Delete every copy of `rule`; iptables exits 1 once none is left."""
    argv = target.argv(target.iptables, "--wait", "-t", NAT, "-D", rule.chain, *rule.params)
    for _ in range(MAX_DUPLICATES):
        result = run(argv, check=False)
        if result.returncode == 1:
            return
        if result.returncode != 0:
            run(argv)  # raises CommandError with iptables' message
