"""Protobuf JSON durations ("10s", "1.5s", "100ms", "1h2m") as whole nanoseconds."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Annotated

from pydantic import BeforeValidator

__all__ = ["MAX_DURATION_SECONDS", "Duration", "format_duration", "parse_duration"]

# Envoy refuses a Duration of more seconds ("Duration out-of-range", it is held as 64-bit
# nanoseconds), far below protobuf's own limit of 315576000000s; every field alike.
MAX_DURATION_SECONDS = 9_223_372_035
MAX_DURATION_NS = MAX_DURATION_SECONDS * 1_000_000_000 + 999_999_999

_UNITS_NS = {
    "h": 3_600_000_000_000,
    "m": 60_000_000_000,
    "s": 1_000_000_000,
    "ms": 1_000_000,
    "us": 1_000,
    "µs": 1_000,
    "ns": 1,
}
_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")


def parse_duration(text: object) -> int:
    """Parse a duration to nanoseconds; raise ValueError naming the accepted forms."""
    if isinstance(text, bool) or not isinstance(text, str):
        raise ValueError(f"duration must be a string such as '10s' or '500ms', got {text!r}")
    s = text.strip()
    if not s:
        raise ValueError("duration must not be empty")
    pos, total = 0, 0
    for match in _PART.finditer(s):
        if match.start() != pos:
            break
        # Exact (a float loses the milliseconds of durations past ~100 days of seconds).
        total += round(Fraction(match.group(1)) * _UNITS_NS[match.group(2)])
        pos = match.end()
    if pos != len(s):
        raise ValueError(
            f"invalid duration {text!r}: use a number with a unit, such as '10s' or '500ms'"
        )
    if total > MAX_DURATION_NS:
        raise ValueError(
            f"duration {text!r} is out of range: Envoy takes at most {MAX_DURATION_SECONDS}s "
            "(about 292 years)"
        )
    return total


def format_duration(nanos: int) -> str:
    """Nanoseconds in protobuf JSON form ("1.500s")."""
    seconds, rest = divmod(nanos, 1_000_000_000)
    if rest == 0:
        return f"{seconds}s"
    return f"{seconds}.{rest:09d}".rstrip("0") + "s"


Duration = Annotated[int, BeforeValidator(parse_duration)]
