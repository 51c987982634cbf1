"""AppProject sync windows (Argo CD `syncWindows`): when an app may sync.

A window is active from each time its 5-field cron `schedule` fires (in `timeZone`, default
UTC) for `duration`. It applies to an app when any of its `applications`, `namespaces`
(destination namespace) or `clusters` (destination server or name) globs matches. Argo CD's
decision (`CanSync`):

- an active deny window blocks, unless the sync is manual and every active deny window
  has `manualSync: true`;
- otherwise an active allow window permits;
- otherwise, when allow windows exist (none active), only a manual sync is permitted, and
  only if one of them has `manualSync: true`;
- no window at all: permitted.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from meshpilot.config.duration import parse_duration
from meshpilot.gitops.errors import GitopsError
from meshpilot.gitops.model import Application, AppProject, SyncWindow

__all__ = [
    "BLOCKED_MESSAGE",
    "CronSchedule",
    "SyncWindowBlocked",
    "WindowDecision",
    "can_sync",
    "is_active",
    "matching_windows",
    "parse_cron",
]

BLOCKED_MESSAGE = "Cannot sync: Blocked by sync window"

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


class SyncWindowBlocked(GitopsError):
    def __init__(self) -> None:
        super().__init__(BLOCKED_MESSAGE)


class CronError(GitopsError):
    """A schedule that is not a valid 5-field cron expression."""


@dataclass(frozen=True, slots=True)
class CronSchedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_star: bool
    weekdays_star: bool

    def matches(self, t: datetime) -> bool:
        if t.minute not in self.minutes or t.hour not in self.hours:
            return False
        if t.month not in self.months:
            return False
        dom = t.day in self.days
        dow = (t.isoweekday() % 7) in self.weekdays
        # cron (robfig, as Argo CD uses): either day field restricted → OR, else AND.
        if self.days_star or self.weekdays_star:
            return dom and dow
        return dom or dow


def _field(text: str, low: int, high: int, names: list[str] | None, where: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text.isdigit() else 1
        if (step_text and not step_text.isdigit()) or step < 1:
            raise CronError(f"{where}: bad step in {part!r}")
        if base in ("*", "?"):
            start, end = low, high
        else:
            first, dash, last = base.partition("-")
            start = _value(first, names, low, where)
            end = _value(last, names, low, where) if dash else (high if step_text else start)
        if not (low <= start <= high and low <= end <= high) or start > end:
            raise CronError(f"{where}: {part!r} is out of range {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _value(text: str, names: list[str] | None, low: int, where: str) -> int:
    if text.isdigit():
        return int(text)
    if names is not None and text.lower() in names:
        return names.index(text.lower()) + low
    raise CronError(f"{where}: {text!r} is not a number")


def parse_cron(schedule: str) -> CronSchedule:
    text = _DESCRIPTORS.get(schedule.strip(), schedule.strip())
    fields = text.split()
    where = f"schedule {schedule!r}"
    if len(fields) != 5:
        raise CronError(f"{where}: expected 5 fields (minute hour day month weekday)")
    weekdays = _field(fields[4], 0, 7, _DAYS, where)
    weekdays = frozenset(d % 7 for d in weekdays)  # 7 is Sunday too
    return CronSchedule(
        minutes=_field(fields[0], 0, 59, None, where),
        hours=_field(fields[1], 0, 23, None, where),
        days=_field(fields[2], 1, 31, None, where),
        months=_field(fields[3], 1, 12, _MONTHS, where),
        weekdays=weekdays,
        days_star=fields[2] in ("*", "?"),
        weekdays_star=fields[4] in ("*", "?"),
    )


def _zone(window: SyncWindow) -> ZoneInfo:
    try:
        return ZoneInfo(window.time_zone or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise GitopsError(f"sync window: unknown timeZone {window.time_zone!r}") from None


def is_active(window: SyncWindow, at: datetime) -> bool:
    """Whether the window is open at `at`: its schedule fired within the last `duration`."""
    schedule = parse_cron(window.schedule)
    try:
        duration = timedelta(seconds=parse_duration(window.duration) / 1e9)
    except ValueError as exc:
        raise GitopsError(f"sync window duration {window.duration!r}: {exc}") from None
    local = at.astimezone(_zone(window)).replace(second=0, microsecond=0)
    # A firing at minute m opens [m, m + duration); look back over the duration.
    minutes = int(duration.total_seconds() // 60)
    if duration.total_seconds() % 60:
        minutes += 1
    return any(schedule.matches(local - timedelta(minutes=back)) for back in range(minutes))


def _glob_any(patterns: Sequence[str], values: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(v, p) for p in patterns for v in values if v)


def matching_windows(project: AppProject, app: Application) -> list[SyncWindow]:
    """The project's windows that apply to `app` (any of its lists matching)."""
    dest = app.spec.destination
    out = []
    for window in project.spec.sync_windows:
        if (
            _glob_any(window.applications, [app.name])
            or _glob_any(window.namespaces, [dest.namespace])
            or _glob_any(window.clusters, [dest.server, dest.name])
        ):
            out.append(window)
    return out


@dataclass(frozen=True, slots=True)
class WindowDecision:
    allowed: bool
    active: tuple[SyncWindow, ...] = ()
    reason: str = ""


def can_sync(
    project: AppProject | None, app: Application, *, manual: bool, at: datetime | None = None
) -> WindowDecision:
    """Argo CD's CanSync for `app` at `at` (default: now); see the module docstring."""
    if project is None:
        return WindowDecision(True)
    windows = matching_windows(project, app)
    if not windows:
        return WindowDecision(True)
    at = at or datetime.now(UTC)
    active = [w for w in windows if is_active(w, at)]
    denies = [w for w in active if w.kind == "deny"]
    if denies:
        if manual and all(w.manual_sync for w in denies):
            return WindowDecision(True, tuple(active), "manual sync allowed by deny window")
        return WindowDecision(False, tuple(active), "an active deny window")
    if any(w.kind == "allow" for w in active):
        return WindowDecision(True, tuple(active), "an active allow window")
    allows = [w for w in windows if w.kind == "allow"]
    if allows:
        if manual and any(w.manual_sync for w in allows):
            return WindowDecision(True, (), "manual sync allowed by allow window")
        return WindowDecision(False, (), "no active allow window")
    return WindowDecision(True)
