"""The JSON bodies of the GitOps API's POST calls, as typed models: a body of the wrong
shape (`[]`, a string for `prune`, an unknown field) is answered 400 naming the field."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from meshpilot.gitops.diff.keys import ResourceKey

__all__ = ["ResourceRef", "RollbackBody", "SyncBody"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ResourceRef(_Body):
    group: StrictStr = ""
    kind: StrictStr
    namespace: StrictStr = ""
    name: StrictStr

    def key(self) -> ResourceKey:
        return ResourceKey(self.group, self.kind, self.namespace, self.name)


class SyncBody(_Body):
    """`POST .../sync`: what the CLI's `app sync --server` sends."""

    prune: StrictBool = False
    dry_run: StrictBool = Field(default=False, alias="dryRun")
    revision: StrictStr | None = None
    resources: list[ResourceRef] | None = None


class RollbackBody(_Body):
    """`POST .../rollback`: the history id to go back to."""

    id: StrictInt
    prune: StrictBool = False
