"""Sync windows: the cron matcher, durations, time zones and Argo CD's CanSync rules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from meshpilot.gitops.errors import GitopsError
from meshpilot.gitops.model import Application, AppProject, SyncWindow
from meshpilot.gitops.windows import can_sync, is_active, matching_windows, parse_cron

MON_10 = datetime(2024, 1, 1, 10, 0, tzinfo=UTC)  # a Monday


def window(**fields: Any) -> SyncWindow:
    base = {"kind": "allow", "schedule": "0 10 * * *", "duration": "1h"}
    return SyncWindow.model_validate({**base, **fields})


@pytest.mark.parametrize(
    ("schedule", "at", "expected"),
    [
        ("*/15 * * * *", datetime(2024, 1, 1, 3, 45, tzinfo=UTC), True),
        ("*/15 * * * *", datetime(2024, 1, 1, 3, 46, tzinfo=UTC), False),
        ("0 9-17 * * mon-fri", datetime(2024, 1, 1, 12, 0, tzinfo=UTC), True),
        ("0 9-17 * * mon-fri", datetime(2024, 1, 6, 12, 0, tzinfo=UTC), False),  # Saturday
        ("0 0 1 jan *", datetime(2024, 1, 1, 0, 0, tzinfo=UTC), True),
        ("0 0 13 * 5", datetime(2024, 1, 5, 0, 0, tzinfo=UTC), True),  # Friday (OR rule)
        ("0 0 * * 7", datetime(2024, 1, 7, 0, 0, tzinfo=UTC), True),  # 7 is Sunday
        ("@daily", datetime(2024, 1, 7, 0, 0, tzinfo=UTC), True),
    ],
)
def test_cron(schedule: str, at: datetime, expected: bool) -> None:
    assert parse_cron(schedule).matches(at) is expected


@pytest.mark.parametrize("bad", ["* * * *", "61 * * * *", "a * * * *", "*/0 * * * *"])
def test_bad_cron_is_refused_with_the_schedule_named(bad: str) -> None:
    with pytest.raises(GitopsError, match="schedule"):
        parse_cron(bad)


def test_duration_and_time_zone() -> None:
    w = window(duration="90m")
    assert is_active(w, MON_10)
    assert is_active(w, datetime(2024, 1, 1, 11, 29, tzinfo=UTC))
    assert not is_active(w, datetime(2024, 1, 1, 11, 30, tzinfo=UTC))
    assert not is_active(w, datetime(2024, 1, 1, 9, 59, tzinfo=UTC))
    tokyo = window(timeZone="Asia/Tokyo")  # 10:00 in Tokyo is 01:00 UTC
    assert is_active(tokyo, datetime(2024, 1, 1, 1, 30, tzinfo=UTC))
    assert not is_active(tokyo, MON_10)


def _app(name: str = "shop", namespace: str = "shop") -> Application:
    return Application.model_validate(
        {
            "metadata": {"name": name, "namespace": "argocd"},
            "spec": {
                "source": {"repoURL": "https://example.com/r.git"},
                "destination": {"name": "in-cluster", "namespace": namespace},
            },
        }
    )


def _project(*windows: SyncWindow) -> AppProject:
    return AppProject.model_validate(
        {
            "metadata": {"name": "p"},
            "spec": {"syncWindows": [w.model_dump(by_alias=True) for w in windows]},
        }
    )


def test_matching_by_application_namespace_or_cluster() -> None:
    project = _project(
        window(applications=["sh*"]),
        window(namespaces=["other"]),
        window(clusters=["in-cluster"]),
        window(applications=["nope"]),
    )
    assert len(matching_windows(project, _app())) == 2


def test_can_sync_rules() -> None:
    app = _app()
    deny = window(kind="deny", applications=["*"])
    allow_later = window(schedule="0 20 * * *", applications=["*"])
    assert not can_sync(_project(deny), app, manual=False, at=MON_10).allowed
    assert not can_sync(_project(deny), app, manual=True, at=MON_10).allowed
    manual_deny = window(kind="deny", applications=["*"], manualSync=True)
    assert can_sync(_project(manual_deny), app, manual=True, at=MON_10).allowed
    # deny wins over an active allow
    assert not can_sync(
        _project(deny, window(applications=["*"])), app, manual=False, at=MON_10
    ).allowed
    # an inactive allow window blocks, unless manual with manualSync
    assert not can_sync(_project(allow_later), app, manual=True, at=MON_10).allowed
    manual_allow = window(schedule="0 20 * * *", applications=["*"], manualSync=True)
    assert can_sync(_project(manual_allow), app, manual=True, at=MON_10).allowed
    assert not can_sync(_project(manual_allow), app, manual=False, at=MON_10).allowed
    # any active allow permits; no matching window permits
    assert can_sync(
        _project(allow_later, window(applications=["*"])), app, manual=False, at=MON_10
    ).allowed
    assert can_sync(_project(window(applications=["x"])), app, manual=False, at=MON_10).allowed
