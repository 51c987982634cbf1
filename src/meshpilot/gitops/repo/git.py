"""Running git: an isolated environment, credentials through GIT_ASKPASS / GIT_SSH_COMMAND
backed by 0600 files in a private directory that is removed afterwards, and errors scrubbed
of credentials. Credentials never appear on a command line."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from meshpilot.gitops.repo.credentials import RepoCredential
from meshpilot.gitops.repo.errors import GitCommandError
from meshpilot.gitops.repo.tempdir import private_tempdir
from meshpilot.gitops.repo.urls import scrub

__all__ = ["GitEnv", "git_auth", "run_git"]

_BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "LC_ALL": "C",
}

_ASKPASS = """#!/bin/sh
case "$1" in
  Username*|username*) cat {dir}/username ;;
  *) cat {dir}/password ;;
esac
"""


@dataclass(frozen=True, slots=True)
class GitEnv:
    env: Mapping[str, str]
    secrets: tuple[str, ...] = ()


def _write_private(path: Path, text: str, mode: int = 0o600) -> None:
    path.touch(mode=mode)
    path.chmod(mode)
    path.write_text(text, encoding="utf-8")


@contextmanager
def git_auth(
    cred: RepoCredential | None, base_env: Mapping[str, str] | None = None
) -> Iterator[GitEnv]:
    """Environment for git with `cred`; its temp files exist only inside the block."""
    env = dict(_BASE_ENV)
    env.update(base_env or {})
    if cred is None:
        yield GitEnv(env)
        return
    with private_tempdir(prefix="meshpilot-gitauth-") as tmp:
        if cred.username or cred.password:
            _write_private(tmp / "username", cred.username + "\n")
            _write_private(tmp / "password", cred.password + "\n")
            _write_private(tmp / "askpass", _ASKPASS.format(dir=shlex.quote(str(tmp))), 0o700)
            env["GIT_ASKPASS"] = str(tmp / "askpass")
        if cred.insecure:
            env["GIT_SSL_NO_VERIFY"] = "true"
        if cred.ssh_private_key:
            key = cred.ssh_private_key
            _write_private(tmp / "id", key if key.endswith("\n") else key + "\n")
            hosts = "no" if cred.insecure else "accept-new"
            env["GIT_SSH_COMMAND"] = " ".join(
                [
                    "ssh",
                    f"-i {shlex.quote(str(tmp / 'id'))}",
                    "-o IdentitiesOnly=yes -o BatchMode=yes",
                    f"-o StrictHostKeyChecking={hosts}",
                    f"-o UserKnownHostsFile={shlex.quote(str(tmp / 'known_hosts'))}",
                ]
            )
        yield GitEnv(env, cred.secrets)


def run_git(
    args: list[str],
    env: GitEnv,
    cwd: Path | None = None,
    timeout: float = 120.0,
    stdout_bytes: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    """Run git; a failure raises GitCommandError with the scrubbed command and stderr."""
    argv = ["git", "-c", "credential.helper=", "-c", "protocol.file.allow=always", *args]
    try:
        result = subprocess.run(
            argv,
            cwd=cwd,
            env=dict(env.env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise GitCommandError(
            scrub(f"git {args[0]} timed out after {timeout:g}s", env.secrets)
        ) from None
    if result.returncode != 0:
        stderr = result.stderr.decode("utf-8", "replace").strip()
        shown = scrub(" ".join(shlex.quote(a) for a in args), env.secrets)
        raise GitCommandError(
            f"git {shown} failed (exit {result.returncode}): {scrub(stderr, env.secrets)}"
        )
    return result
