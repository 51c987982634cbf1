"""Secret values out of diffs, as Argo CD hides them: every `data` value becomes `+` signs,
eight for the first distinct value of a key, one more for each further distinct value. Equal
values get equal masks, so a diff still shows *that* a value changed, never the value.
Call it on normalized objects (`stringData` already folded into `data`).
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["MASK", "is_secret", "mask_secrets"]

MASK = "++++++++"


def is_secret(obj: dict[str, Any] | None) -> bool:
    return obj is not None and obj.get("kind") == "Secret" and _group(obj) == ""


def mask_secrets(
    target: dict[str, Any] | None, live: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Masked copies of a (target, live) pair of Secrets; other kinds come back unchanged."""
    if not is_secret(target) and not is_secret(live):
        return target, live
    masked = [copy.deepcopy(obj) if obj is not None else None for obj in (target, live)]
    # stringData is folded by normalization; masked too in case a caller skipped it.
    for field in ("data", "stringData"):
        datas = [_values(obj, field) for obj in masked]
        for key in sorted({key for data in datas for key in data}):
            replacement: dict[str, str] = {}
            for data in datas:
                if key not in data:
                    continue
                value = str(data[key])
                if value not in replacement:
                    replacement[value] = MASK + "+" * len(replacement)
                data[key] = replacement[value]
    return masked[0], masked[1]


def _values(obj: dict[str, Any] | None, field: str) -> dict[str, Any]:
    if obj is None:
        return {}
    data = obj.get(field)
    if isinstance(data, dict):
        return data
    return {}


def _group(obj: dict[str, Any]) -> str:
    api_version = str(obj.get("apiVersion") or "")
    return api_version.rpartition("/")[0]
