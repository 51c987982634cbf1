"""`meshpilot iptables`: istio-iptables' capture rules for this network namespace.

Same flags, short forms and defaults as istio-iptables, e.g. what istio-init runs:
`meshpilot iptables -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x "" -b '*' -d 15090,15021,15020`
"""

from __future__ import annotations

from typing import Any

import click

from meshpilot.capture.apply import IptablesTarget, apply_capture, remove_capture
from meshpilot.capture.flags import CaptureFlags, config_from_flags
from meshpilot.capture.rules import CaptureConfigError, build_rules
from meshpilot.settings import Ports

__all__ = ["iptables"]

_PORTS = Ports()

# (short, long, default, help): istio-iptables' names (tools/istio-iptables/pkg/cmd/root.go).
_FLAGS: tuple[tuple[str, str, str, str], ...] = (
    ("-p", "--envoy-port", str(_PORTS.outbound_capture), "Port outbound TCP is redirected to."),
    ("-z", "--inbound-capture-port", str(_PORTS.inbound_capture), "Port inbound TCP goes to."),
    ("-e", "--inbound-tunnel-port", "15008", "HBONE tunnel port, never redirected."),
    ("-u", "--proxy-uid", str(_PORTS.proxy_uid), "UIDs whose traffic is not redirected."),
    ("-g", "--proxy-gid", "", "GIDs whose traffic is not redirected (default: the UIDs)."),
    ("-m", "--istio-inbound-interception-mode", "", "REDIRECT (TPROXY: not supported yet)."),
    ("-b", "--istio-inbound-ports", "", "Inbound ports to redirect; '*' for all."),
    ("-d", "--istio-local-exclude-ports", "", "Inbound ports not redirected (with -b '*')."),
    ("-i", "--istio-service-cidr", "", "Outbound CIDRs to redirect; '*' for all."),
    ("-x", "--istio-service-exclude-cidr", "", "Outbound CIDRs never redirected."),
    ("-q", "--istio-outbound-ports", "", "Outbound ports always redirected."),
    ("-o", "--istio-local-outbound-ports-exclude", "", "Outbound ports never redirected."),
    ("-c", "--istio-exclude-interfaces", "", "Interfaces never captured."),
    ("-k", "--kube-virt-interfaces", "", "Interfaces whose inbound is treated as outbound."),
)


def _flag_options(command: Any) -> Any:
    for short, long, default, text in reversed(_FLAGS):
        command = click.option(short, long, default=default, show_default=bool(default), help=text)(
            command
        )
    return command


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@_flag_options
@click.option("-n", "--dry-run", is_flag=True, help="Print the rules (iptables-restore input).")
@click.option("--clean", is_flag=True, help="Remove the capture rules instead of installing them.")
@click.option(
    "--network-namespace",
    "--netns",
    "netns",
    metavar="NS",
    help="Apply in this network namespace: a name (ip netns) or a path (/proc/PID/ns/net).",
)
def iptables(dry_run: bool, clean: bool, netns: str | None, **flags: str) -> None:
    """Install Istio's traffic capture rules (istio-iptables) in the nat table of the current
    network namespace, replacing any installed before."""
    try:
        config = config_from_flags(CaptureFlags(**flags))
    except CaptureConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    rules = build_rules(config)
    if dry_run:
        click.echo(rules.undo_text() if clean else rules.restore_text(), nl=False)
        return
    target = IptablesTarget(netns=netns)
    if clean:
        remove_capture(target, rules)
    else:
        apply_capture(rules, target)
