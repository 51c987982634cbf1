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
from meshpilot.gitops.repo.trust import RepoTrust, is_ssh
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


def _write_private(path: Path, text: str, mode: int = 0o600) -> Path:
    path.touch(mode=mode)
    path.chmod(mode)
    path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    return path


def _ssh_command(tmp: Path, cred: RepoCredential | None, trust: RepoTrust) -> str:
    """ssh for git: our key only, no user config, host keys from the trust's known hosts
    (strict) or no check at all for an `insecure` repository, as Argo CD does."""
    opts = ["-F /dev/null", "-o IdentitiesOnly=yes -o BatchMode=yes -o ConnectTimeout=30"]
    if cred is not None and cred.ssh_private_key:
        opts.append(f"-i {shlex.quote(str(_write_private(tmp / 'id', cred.ssh_private_key)))}")
    if cred is not None and cred.insecure:
        opts.append("-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null")
    else:
        known = _write_private(tmp / "known_hosts", trust.ssh_known_hosts)
        opts.append(f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={shlex.quote(str(known))}")
    opts.append("-o GlobalKnownHostsFile=/dev/null -o LogLevel=ERROR")
    return " ".join(["ssh", *opts])


@contextmanager
def git_auth(
    cred: RepoCredential | None,
    base_env: Mapping[str, str] | None = None,
    trust: RepoTrust | None = None,
    url: str = "",
) -> Iterator[GitEnv]:
    """Environment for git talking to `url` with `cred`; its temp files (0600, in a 0700
    directory) exist only inside the block."""
    env = dict(_BASE_ENV)
    env.update(base_env or {})
    trust = trust or RepoTrust()
    ca = trust.ca_for(url)
    if cred is None and not ca and not is_ssh(url):
        yield GitEnv(env)
        return
    with private_tempdir(prefix="meshpilot-gitauth-", owned=True) as tmp:
        if cred is not None and (cred.username or cred.password):
            _write_private(tmp / "username", cred.username)
            _write_private(tmp / "password", cred.password)
            _write_private(tmp / "askpass", _ASKPASS.format(dir=shlex.quote(str(tmp))), 0o700)
            env["GIT_ASKPASS"] = str(tmp / "askpass")
        if cred is not None and cred.insecure:
            env["GIT_SSL_NO_VERIFY"] = "true"
        elif ca:
            env["GIT_SSL_CAINFO"] = str(_write_private(tmp / "ca.pem", ca))
        if cred is not None and cred.tls_client_cert_data and cred.tls_client_cert_key:
            env["GIT_SSL_CERT"] = str(_write_private(tmp / "client.crt", cred.tls_client_cert_data))
            env["GIT_SSL_KEY"] = str(_write_private(tmp / "client.key", cred.tls_client_cert_key))
        if is_ssh(url):
            env["GIT_SSH_COMMAND"] = _ssh_command(tmp, cred, trust)
            env["GIT_SSH_VARIANT"] = "ssh"
        yield GitEnv(env, cred.secrets if cred is not None else ())


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
