"""Capture golden cases: `golden/<case>.flags` holds a comment line saying what the case
proves, then `meshpilot iptables` flags, exactly as a user types them (shell quoting;
`{golden}` stands for the golden directory, where the cases' resolv.conf files are).

Expected outputs next to it:
- `<case>.rules`: `meshpilot iptables --dry-run` output (istio-iptables' restore text);
- `<case>.save`:  `iptables-save -t nat` after applying the case in a fresh network
  namespace, then the other tables (and with --dual-stack, ip6tables-save's) that hold
  rules, comment lines dropped (checked by tests/e2e/test_capture.py).

Refresh both with `REFRESH_GOLDEN=1 pytest tests/unit/capture tests/e2e/test_capture.py`.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

GOLDEN_DIR = Path(__file__).parent / "golden"
REFRESH = os.environ.get("REFRESH_GOLDEN") == "1"


@dataclass(frozen=True)
class CaptureCase:
    name: str
    args: tuple[str, ...]

    def expected(self, suffix: str) -> Path:
        return GOLDEN_DIR / f"{self.name}.{suffix}"


def load_cases() -> list[CaptureCase]:
    cases = []
    for path in sorted(GOLDEN_DIR.glob("*.flags")):
        lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
        text = " ".join(lines).replace("{golden}", str(GOLDEN_DIR))
        cases.append(CaptureCase(path.stem, tuple(shlex.split(text))))
    return cases


def check_golden(path: Path, actual: str) -> None:
    """Compare with (or, when refreshing, write) one golden file."""
    if REFRESH:
        path.write_text(actual)
        return
    assert path.exists(), f"{path} missing: run with REFRESH_GOLDEN=1 and review it"
    expected = path.read_text()
    assert actual == expected, (
        f"{path.name} differs; run REFRESH_GOLDEN=1 and review the diff\n"
        f"--- expected\n{expected}--- actual\n{actual}"
    )
