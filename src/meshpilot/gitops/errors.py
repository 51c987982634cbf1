"""Exceptions of the GitOps package.

    MeshpilotError
    └── GitopsError                 base of everything below
        ├── ProjectError            an AppProject forbids it (Argo CD's messages, spec §9.9)
        ├── PermissionDenied        RBAC said no: `permission denied: applications, sync, ...`
        ├── ApplicationNotFound     no such Application in the store
        └── RbacConfigError         an RBAC policy that cannot be read (file, line)

The CLI prints them as one line without a traceback (they are MeshpilotErrors).
"""

from __future__ import annotations

from collections.abc import Sequence

from meshpilot.errors import MeshpilotError

__all__ = [
    "ApplicationNotFound",
    "GitopsError",
    "PermissionDenied",
    "ProjectError",
    "RbacConfigError",
]


class GitopsError(MeshpilotError):
    """Base class of GitOps errors."""


class ProjectError(GitopsError):
    """An Application or one of its resources is not permitted by its AppProject."""

    def __init__(self, messages: Sequence[str]) -> None:
        self.messages = tuple(messages)
        super().__init__("; ".join(self.messages))


class PermissionDenied(GitopsError):
    """Argo CD's RBAC denial, with its message shape."""

    def __init__(self, resource: str, action: str, obj: str, subject: str) -> None:
        self.resource, self.action, self.object, self.subject = resource, action, obj, subject
        super().__init__(f"permission denied: {resource}, {action}, {obj}, sub: {subject}")


class ApplicationNotFound(GitopsError):
    """kubectl's and argocd's `applications.argoproj.io "x" not found`."""

    def __init__(self, name: str) -> None:
        super().__init__(f'applications.argoproj.io "{name}" not found')


class RbacConfigError(GitopsError):
    """An RBAC policy line or file that cannot be understood."""
