"""The plan as text: one row per task in the order they run, then problems and notes
(`argocd app sync --dry-run` shows the same columns). No object content is printed, so a
Secret's values cannot leak through it."""

from __future__ import annotations

from meshpilot.gitops.sync.plan import SyncPlan
from meshpilot.gitops.sync.task import SyncTask
from meshpilot.text_table import render_table

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
    lines.append(render_table(rows))
    lines.extend(f"problem: {p}" for p in plan.problems)
    lines.extend(f"note: {n}" for n in plan.notes)
    return "\n".join(lines) + "\n"
