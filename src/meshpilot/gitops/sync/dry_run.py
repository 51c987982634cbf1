"""The plan as text: one row per task in the order they run, then problems and notes
(`argocd app sync --dry-run` shows the same columns). No object content is printed, so a
Secret's values cannot leak through it."""

from __future__ import annotations

from meshpilot.gitops.sync.plan import SyncPlan
from meshpilot.gitops.sync.task import SyncTask

__all__ = ["render_plan"]

_HEADER = ("PHASE", "WAVE", "ACTION", "GROUP", "KIND", "NAMESPACE", "NAME", "MESSAGE")


def _row(task: SyncTask) -> tuple[str, ...]:
    key = task.key
    return (
        str(task.phase),
        str(task.wave),
        str(task.action),
        key.group,
        key.kind,
        key.namespace,
        key.name,
        task.message,
    )


def render_plan(plan: SyncPlan) -> str:
    mode = " (dry run)" if plan.dry_run else ""
    count = len(plan.tasks)
    lines = [
        f"Sync plan for application {plan.app}{mode}: {count} tasks in {len(plan.waves)} waves"
    ]
    rows = [_HEADER, *(_row(t) for t in plan.tasks)]
    if plan.on_fail:
        rows.extend(_row(t) for t in plan.on_fail)
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    lines.extend(f"problem: {p}" for p in plan.problems)
    lines.extend(f"note: {n}" for n in plan.notes)
    return "\n".join(lines) + "\n"
