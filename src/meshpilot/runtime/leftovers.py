"""What a crashed run left behind, found by name and removed.

Every name we create starts with a prefix no one else uses: namespaces `mp-<cluster>-...`
(and their `/etc/netns/mp-<cluster>-...` directories), bridges `mp-<cluster>`, host veth
ends `mpv-<hash>`, FORWARD rules commented `meshpilot:mp-<cluster>`. A cluster is live
while the process that owns it runs: its owner file `<state dir>/<cluster>.owner` records
that process's PID and start time (so a reused PID does not count). Removal only touches
clusters whose owner is gone, so two runs on one machine (two test sessions, a demo and a
test) never remove each other's pods. The owner itself is meshpilot/owner.py's, shared with
the temporary directories of discovery and the proxy agent.
"""

from __future__ import annotations

from pathlib import Path

from meshpilot.owner import TEMP_DIR, WORKDIR_PREFIX, Owner, process_start_time
from meshpilot.runtime.commands import run
from meshpilot.runtime.netns import delete_netns, list_links, list_netns, list_netns_etc
from meshpilot.runtime.network import FORWARD_COMMENT_PREFIX, delete_bridge, delete_forward_rules

__all__ = [
    "LINK_PREFIX",
    "NAME_PREFIX",
    "TEMP_DIR",
    "WORKDIR_PREFIX",
    "Owner",
    "cluster_of",
    "live_clusters",
    "process_start_time",
    "remove_leftovers",
]

NAME_PREFIX = "mp-"  # namespaces mp-<cluster>-<namespace>-<pod>, bridges mp-<cluster>
LINK_PREFIX = "mpv-"  # host ends of pod veth pairs
OWNER_SUFFIX = ".owner"


def cluster_of(name: str) -> str | None:
    """The cluster a namespace or bridge name belongs to, or None if not ours."""
    if not name.startswith(NAME_PREFIX):
        return None
    return name[len(NAME_PREFIX) :].split("-", 1)[0] or None


def owner_path(state_dir: Path, cluster: str) -> Path:
    return state_dir / f"{cluster}{OWNER_SUFFIX}"


def live_clusters(state_dir: Path) -> set[str]:
    """Clusters whose owner still runs; owner files of dead owners are removed."""
    live = set()
    for path in sorted(state_dir.glob(f"*{OWNER_SUFFIX}")):
        owner = Owner.read(path)
        if owner is not None and owner.alive():
            live.add(path.name[: -len(OWNER_SUFFIX)])
            continue
        if owner is not None:
            owner.remove_workdir()
        path.unlink(missing_ok=True)
    return live


def remove_leftovers(state_dir: Path) -> list[str]:
    """Remove the namespaces, links, FORWARD rules and temporary pod directories of
    clusters without a live owner;
    returns what was removed. Call it holding the state directory's lock."""
    live = live_clusters(state_dir)
    removed = []
    for netns in list_netns():
        cluster = cluster_of(netns)
        if cluster is not None and cluster not in live:
            delete_netns(netns)
            removed.append(f"netns {netns}")
    for netns in list_netns_etc():
        cluster = cluster_of(netns)
        if cluster is not None and cluster not in live:
            delete_netns(netns)  # only its /etc/netns directory was left
            removed.append(f"/etc/netns/{netns}")
    # A host veth end lives and dies with its peer in the pod namespace: deleting stale
    # namespaces removes them, and a veth of a live cluster may not be enslaved yet.
    for link in list_links():
        cluster = cluster_of(link.name)
        if link.kind == "bridge" and cluster is not None and cluster not in live:
            delete_bridge(link.name)
            removed.append(f"bridge {link.name}")
    for bridge in _forward_rule_bridges():
        cluster = cluster_of(bridge)
        if cluster is not None and cluster not in live:
            delete_forward_rules(bridge)
            removed.append(f"FORWARD rule for {bridge}")
    return removed


def _forward_rule_bridges() -> set[str]:
    """Bridges named in our FORWARD rules' comments."""
    out = run(["iptables", "--wait", "-S", "FORWARD"], check=False).stdout
    bridges = set()
    for line in out.splitlines():
        words = line.replace('"', "").split()
        for word in words:
            if word.startswith(FORWARD_COMMENT_PREFIX):
                bridges.add(word[len(FORWARD_COMMENT_PREFIX) :])
    return bridges
