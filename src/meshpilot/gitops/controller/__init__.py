"""The application controller: reconcile loop, drift detection, automated sync and
self-heal, with notifications on status transitions (see loop.py)."""

from __future__ import annotations

from meshpilot.gitops.controller.autosync import AutoSync, decide
from meshpilot.gitops.controller.loop import Controller, ControllerSettings, PushEvent
from meshpilot.gitops.controller.metrics import AppInfo, Metrics
from meshpilot.gitops.controller.queue import Level, WorkQueue
from meshpilot.gitops.controller.reconcile import Reconciler, ReconcileResult
from meshpilot.gitops.controller.revisions import CachingRepoService
from meshpilot.gitops.controller.view import StoreView

__all__ = [
    "AppInfo",
    "AutoSync",
    "CachingRepoService",
    "Controller",
    "ControllerSettings",
    "Level",
    "Metrics",
    "PushEvent",
    "ReconcileResult",
    "Reconciler",
    "StoreView",
    "WorkQueue",
    "decide",
]
