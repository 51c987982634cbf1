"""The etcd store's errors, importable without the gRPC client (store/open.py)."""

from __future__ import annotations

from meshpilot.errors import MeshpilotError

__all__ = ["EtcdError", "EtcdUrlError", "NotLeaderError"]


class EtcdUrlError(MeshpilotError):
    """A malformed etcd store URL or unreadable TLS file."""


class EtcdError(MeshpilotError):
    """etcd could not be reached, or refused a request."""


class NotLeaderError(EtcdError):
    """A fenced write refused: this replica no longer holds the leader key (lease.py)."""
