"""What `meshpilot apply` and `delete` check for Argo CD objects before the store sees them:
RBAC for the caller (when one is named) and the AppProject rules for Applications, as
argocd-server does on create and update.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.gitops.errors import ProjectError
from meshpilot.gitops.model import Application, AppProject
from meshpilot.gitops.projects import CONTROL_NAMESPACE, ProjectIndex, application_violations
from meshpilot.gitops.rbac import RBAC_CONFIG_MAP, Enforcer, RbacPolicy, app_objects
from meshpilot.gitops.rbac import policy_from_config_map as _policy_from_data
from meshpilot.store.base import StoreSnapshot

__all__ = ["Caller", "check_deletes", "check_writes", "policy_from_store", "projects_in"]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who acts. `user=None` is the local operator (no RBAC, like kubectl's admin context)."""

    user: str | None = None
    groups: tuple[str, ...] = ()
    enforcer: Enforcer | None = None
    control_namespace: str = CONTROL_NAMESPACE

    def check(self, resource: str, action: str, obj: str | Sequence[str]) -> None:
        if self.user is None:
            return
        enforcer = self.enforcer or Enforcer.builtin()
        enforcer.check(self.user, self.groups, resource, action, obj)

    def allows(self, resource: str, action: str, obj: str | Sequence[str]) -> bool:
        if self.user is None:
            return True
        enforcer = self.enforcer or Enforcer.builtin()
        return enforcer.enforce(self.user, self.groups, resource, action, obj)


def projects_in(snapshot: StoreSnapshot) -> list[AppProject]:
    return [o.model for o in snapshot.of_kind(Kind.APP_PROJECT) if isinstance(o.model, AppProject)]


def policy_from_store(
    snapshot: StoreSnapshot, control_namespace: str = CONTROL_NAMESPACE
) -> RbacPolicy | None:
    """The policy of the `argocd-rbac-cm` ConfigMap in the control namespace, if stored."""
    obj = snapshot.objects.get(ConfigKey(Kind.CONFIG_MAP, control_namespace, RBAC_CONFIG_MAP))
    if obj is None:
        return None
    data: dict[str, str] = dict(getattr(obj.model, "data", {}) or {})
    return _policy_from_data(data, f"ConfigMap {control_namespace}/{RBAC_CONFIG_MAP}")


def check_writes(
    objects: Iterable[ConfigObject[Any]], snapshot: StoreSnapshot, caller: Caller
) -> None:
    """RBAC for every Argo CD object written, then each Application against its project
    (projects written in the same batch count). Raises PermissionDenied or ProjectError."""
    objects = list(objects)
    batch_projects = [o.model for o in objects if isinstance(o.model, AppProject)]
    for obj in objects:
        action = "update" if obj.key in snapshot.objects else "create"
        if isinstance(obj.model, AppProject):
            caller.check("projects", action, obj.name)
        elif isinstance(obj.model, Application):
            app = obj.model
            caller.check(
                "applications", action, app_objects(app.spec.project_name, obj.namespace, obj.name)
            )
    projects = {(p.metadata.namespace, p.metadata.name): p for p in projects_in(snapshot)}
    projects.update({(p.metadata.namespace, p.metadata.name): p for p in batch_projects})
    index = ProjectIndex(projects.values(), caller.control_namespace)
    problems: list[str] = []
    for obj in objects:
        if isinstance(obj.model, Application):
            problems.extend(application_violations(_with_namespace(obj), index))
    if problems:
        raise ProjectError(problems)


def check_deletes(keys: Iterable[ConfigKey], snapshot: StoreSnapshot, caller: Caller) -> None:
    for key in keys:
        obj = snapshot.objects.get(key)
        if key.kind is Kind.APP_PROJECT:
            caller.check("projects", "delete", key.name)
        elif key.kind is Kind.APPLICATION and obj is not None:
            project = getattr(getattr(obj.model, "spec", None), "project_name", "default")
            caller.check("applications", "delete", app_objects(project, key.namespace, key.name))


def _with_namespace(obj: ConfigObject[Any]) -> Application:
    """The Application with the namespace the store files it under."""
    app: Application = obj.model
    if app.metadata.namespace == obj.namespace:
        return app
    meta = app.metadata.model_copy(update={"namespace": obj.namespace})
    return app.model_copy(update={"metadata": meta})
