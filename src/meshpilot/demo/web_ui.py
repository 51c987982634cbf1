"""The demo's web UI: `meshpilot gitops serve` on loopback over an empty store of the demo's
workspace, with the mesh pages reading the demo's control plane (`--discovery`)."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from meshpilot.demo.processes import DemoError, die_with_parent, http_get, tail

__all__ = ["WebUi"]

_MAIN = "from meshpilot.cli.main import main; main()"


@dataclass
class WebUi:
    store: Path
    state_dir: Path
    port: int
    discovery: str  # the control plane's monitoring address, host:port
    log: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def args(self) -> list[str]:
        return [
            "gitops", "serve", "--store", str(self.store),
            "--listen", f"127.0.0.1:{self.port}", "--discovery", self.discovery,
            "--state-dir", str(self.state_dir),
        ]  # fmt: skip

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def password_file(self) -> Path:
        return self.state_dir / "initial-admin-password"

    def shown(self) -> str:
        return shlex.join(["meshpilot", *self.args])

    def start(self, timeout: float = 30.0) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _MAIN, *self.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # the demo stops it, after Ctrl-C reached the demo
                preexec_fn=die_with_parent,
            )
        deadline = time.monotonic() + timeout
        while http_get(self.url + "login")[0] != 200:
            if self.proc.poll() is not None:
                raise DemoError(f"meshpilot gitops serve (the web UI) exited: {tail(self.log)}")
            if time.monotonic() > deadline:
                raise DemoError(f"the web UI not ready after {timeout:g}s: {tail(self.log)}")
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
        proc.wait()
