"""Whether this controller leads: always, alone on a directory store; on etcd, while it
holds the leader key (store/etcd/lease.py). A standby serves reads; what would write as
the controller (sync, rollback, a refresh or a diff, which reconcile) is refused with 503
naming the leader. Shown on /debug/leaderz."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshpilot.errors import MeshpilotError

__all__ = ["LeadershipState", "NotLeading"]


class NotLeading(MeshpilotError):
    """This replica stands by; another leads."""


@dataclass(slots=True)
class LeadershipState:
    identity: str = ""  # this replica (host:pid, API address)
    elected: bool = False  # False: no election (one controller on a directory store)
    leading: bool = True
    leader: str = ""  # the holder of the leader key, when known
    term: int = 0  # the leader key's create revision (the fence of its writes)

    def check(self) -> None:
        if not self.leading:
            holder = self.leader or "none yet (an election is under way)"
            raise NotLeading(
                f"this GitOps controller ({self.identity}) stands by; the leader is {holder}: "
                "send syncs, rollbacks and refreshes there"
            )

    def as_json(self) -> dict[str, Any]:
        return {
            "identity": self.identity,
            "elected": self.elected,
            "leading": self.leading,
            "leader": self.leader if self.elected else self.identity,
            "term": self.term,
        }
