"""git's credentials live in a private `meshpilot-gitauth-*` directory only while git runs.
A process killed with -9 in the middle leaves the password on disk: the next process to
talk to git with credentials removes it, and leaves a running process's directory alone.
Real processes, in a temporary directory of the test's own (TMPDIR)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_HOLD = """
import sys, time
from meshpilot.gitops.repo.credentials import RepoCredential
from meshpilot.gitops.repo.git import git_auth
url = "https://git.example/team/config.git"
with git_auth(RepoCredential(url=url, username="bot", password="s3cret"), url=url) as env:
    print(env.env["GIT_ASKPASS"], flush=True)
    if sys.argv[1] == "hold":
        time.sleep(120)
"""


def holder(tmp: Path, mode: str) -> tuple[subprocess.Popen[str], Path]:
    """A process inside git_auth (`hold`: until killed); returns it and its directory."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, mode], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip()).parent


def test_a_killed_processes_git_credentials_go_at_the_next_use(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    running, running_dir = holder(tmp, "hold")
    killed, killed_dir = holder(tmp, "hold")
    try:
        killed.kill()
        killed.wait()
        assert (killed_dir / "password").read_text() == "s3cret\n"  # left on disk

        done, done_dir = holder(tmp, "once")
        assert done.wait(timeout=30) == 0
        assert not killed_dir.exists()
        assert not done_dir.exists()  # removed on the way out, as before
        assert (running_dir / "password").is_file()  # a running process's: kept
    finally:
        for proc in (running, killed):
            proc.kill()
            proc.wait()
