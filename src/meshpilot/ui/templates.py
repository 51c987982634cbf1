"""The Jinja2 templates shipped in the package (meshpilot/ui/templates), HTML-escaped."""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2

__all__ = ["render"]


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("meshpilot.ui", "templates"),
        autoescape=True,  # every value is escaped: object names and diffs come from Git
        undefined=jinja2.StrictUndefined,  # a template naming a missing value is a bug, loud
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(template: str, **values: Any) -> str:
    return _environment().get_template(template).render(**values)
