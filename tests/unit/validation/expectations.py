"""YAML fixtures that carry their own expected diagnostics.

The first line of a fixture is a comment saying what it proves. Under any line, comments

    #^ error spec.http[0].route[1].weight: weight -5 must not be negative
    #^ warning -: a message about the whole object

expect one diagnostic each, on the nearest line above that is not such a comment, with that
severity, field (`-` for none) and exact message. A fixture must produce exactly the
diagnostics it lists: no more, no fewer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from meshpilot.config.diagnostics import Diagnostic

__all__ = ["Expected", "assert_diagnostics", "expected_in", "fixtures_in"]

_EXPECT = re.compile(r"^\s*#\^ (error|warning|info) (.+?): (.*)$")


@dataclass(frozen=True, order=True, slots=True)
class Expected:
    line: int
    severity: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.line}: {self.severity} {self.field or '-'}: {self.message}"

    @classmethod
    def of(cls, diag: Diagnostic) -> Expected:
        message = f"[{diag.code}] {diag.message}" if diag.code else diag.message
        return cls(diag.line, diag.severity.value, diag.field, message)


def fixtures_in(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.yaml"))


def expected_in(path: Path) -> list[Expected]:
    found = []
    target = 0
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = _EXPECT.match(text)
        if match is None:
            target = number
            continue
        severity, field, message = match.groups()
        found.append(Expected(target, severity, "" if field == "-" else field, message))
    return sorted(found)


def assert_diagnostics(path: Path, diagnostics: Iterable[Diagnostic]) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("#"), f"{path.name}: the first line must say what the fixture proves"
    expected = expected_in(path)
    actual = sorted(Expected.of(d) for d in diagnostics if d.file == str(path))
    missing = [str(e) for e in expected if e not in actual]
    unexpected = [str(a) for a in actual if a not in expected]
    assert not missing and not unexpected, (
        f"{path.name}\n  missing:\n    "
        + "\n    ".join(missing)
        + "\n  unexpected:\n    "
        + "\n    ".join(unexpected)
    )
