"""Errors of the repo service.

MeshpilotError
└── RepoError                  a repository operation failed (URL shown without credentials)
    ├── RepoUnreachableError   clone/fetch/ls-remote failed: network, auth, no such repo
    ├── UnknownRevisionError   targetRevision is no branch, tag or commit of the repo
    └── GitCommandError        another git command failed (command, exit code, stderr)
"""

from __future__ import annotations

from meshpilot.errors import MeshpilotError

__all__ = ["GitCommandError", "RepoError", "RepoUnreachableError", "UnknownRevisionError"]


class RepoError(MeshpilotError):
    """A Git repository could not be read."""


class RepoUnreachableError(RepoError):
    """The repository cannot be reached or refused our credentials."""


class UnknownRevisionError(RepoError):
    """The revision names no branch, tag or commit of the repository."""


class GitCommandError(RepoError):
    """A git command failed; the message is scrubbed of credentials."""
