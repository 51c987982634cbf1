"""Pods on one machine: network namespaces with their own IP on a bridge (DESIGN.md,
"Without Kubernetes").

    commands.py   running ip/iptables/setpriv; CommandError, HostSupportError
    network.py    the bridge, subnet choice and IP allocation
    netns.py      namespaces and veth links
    pod.py        PodSpec and Pod (netns + capture rules + app + sidecar processes)
    cluster.py    Cluster: a context manager owning a bridge and its pods
    leftovers.py  finding and removing what a crashed run left behind

Import the modules themselves (`from meshpilot.runtime.cluster import Cluster`): this
package re-exports nothing, so that `capture.apply` can use `runtime.commands` without an
import cycle through `runtime.pod`.
"""

from __future__ import annotations

__all__: list[str] = []
