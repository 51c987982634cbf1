"""`meshpilot iptables`: istio-iptables' capture rules for this network namespace.

Same flags, short forms and defaults as istio-iptables, e.g. what istio-init runs:
`meshpilot iptables -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x "" -b '*' -d 15090,15021,15020`
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from meshpilot.capture.apply import IptablesTarget, apply_capture, remove_capture
from meshpilot.capture.build import build_rules
from meshpilot.capture.flags import CaptureFlags, config_from_flags, resolv_conf_servers
from meshpilot.capture.rules import CaptureConfigError
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
    ("-m", "--istio-inbound-interception-mode", "", "REDIRECT or TPROXY."),
    ("-b", "--istio-inbound-ports", "", "Inbound ports to redirect; '*' for all."),
    ("-d", "--istio-local-exclude-ports", "", "Inbound ports not redirected (with -b '*')."),
    ("-i", "--istio-service-cidr", "", "Outbound CIDRs to redirect; '*' for all."),
    ("-x", "--istio-service-exclude-cidr", "", "Outbound CIDRs never redirected."),
    ("-q", "--istio-outbound-ports", "", "Outbound ports always redirected."),
    ("-o", "--istio-local-outbound-ports-exclude", "", "Outbound ports never redirected."),
    ("-c", "--istio-exclude-interfaces", "", "Interfaces never captured."),
    ("-k", "--kube-virt-interfaces", "", "Interfaces whose inbound is treated as outbound."),
    ("-t", "--istio-inbound-tproxy-mark", "1337", "TPROXY: the mark of captured inbound."),
    ("-r", "--istio-inbound-tproxy-route-table", "133", "TPROXY: the policy route table."),
)

# (flag, environment variable, help): istio-iptables' boolean flags and their variables.
_SWITCHES: tuple[tuple[str, str | None, str], ...] = (
    ("--dual-stack", "ISTIO_AGENT_DUAL_STACK", "ip6tables rules beside the IPv4 ones."),
    ("--redirect-dns", "ISTIO_META_DNS_CAPTURE", "Capture DNS (port 53) to the agent on 15053."),
    ("--capture-all-dns", None, "Capture DNS to any server, not only resolv.conf's."),
    ("--drop-invalid", "INVALID_DROP", "Drop packets conntrack finds INVALID."),
)

# (option, environment variable, default, help): settings istio-iptables reads from its
# environment only; here they are options too.
_ENV_OPTIONS: tuple[tuple[str, str, str, str], ...] = (
    ("--outbound-owner-groups", "ISTIO_OUTBOUND_OWNER_GROUPS", "*", "Groups (GIDs or names) "
     "whose outbound is captured; '*' for all."),
    ("--outbound-owner-groups-exclude", "ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE", "", "Groups whose "
     "outbound is not captured (with '*' above)."),
    ("--outbound-ipv4-loopback-cidr", "ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR", "127.0.0.1/32",
     "Loopback range the app reaches without capture."),
)  # fmt: skip


def _flag_options(command: Any) -> Any:
    for short, long, default, text in reversed(_FLAGS):
        command = click.option(short, long, default=default, show_default=bool(default), help=text)(
            command
        )
    for name, env, text in reversed(_SWITCHES):
        switch = click.option(name, is_flag=True, envvar=env, show_envvar=bool(env), help=text)
        command = switch(command)
    for name, env, default, text in reversed(_ENV_OPTIONS):
        option = click.option(
            name, envvar=env, show_envvar=True, default=default, show_default=True, help=text
        )
        command = option(command)
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
@click.option(
    "--resolv-conf",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("/etc/resolv.conf"),
    show_default=True,
    help="With --redirect-dns: DNS to these nameservers is captured.",
)
def iptables(
    dry_run: bool, clean: bool, netns: str | None, resolv_conf: Path, **flags: Any
) -> None:
    """Install Istio's traffic capture rules (istio-iptables) in the current network
    namespace (nat, mangle and raw tables; ip6tables too with --dual-stack), replacing any
    installed before."""
    try:
        if flags["redirect_dns"] and not flags["capture_all_dns"]:
            flags["dns_servers"] = resolv_conf_servers(resolv_conf)
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
