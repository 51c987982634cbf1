"""`meshpilot run`: Pods and Deployments realized as network-namespace pods from their
injected spec (the embedded store's stand-in for kubelet, nothing more).

workloads.py  the pods of Pod and Deployment documents (replicas, names), injected
env.py        a container's environment and `$(VAR)` expansion, as kubelet does them
plan.py       what runs for one injected pod: volumes, init containers, containers, hooks
access.py     the agent pointed at this machine's control plane socket, per-pod proxy users
runner.py     one pod started as kubelet would: volumes, init containers, containers, ready
controller.py the store's Deployments kept running: rolling replacement, scaling, publishing
"""

from __future__ import annotations

__all__: list[str] = []
