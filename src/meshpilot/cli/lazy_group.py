"""A click group that imports a command's module only when that command runs.

click's documented LazyGroup pattern: the group maps command names to "module:attribute" and
imports on use, so `meshpilot --help` and `meshpilot version` do not pay for gRPC, the GitOps
engine or the Envoy protos. The short help shown by `--help` lives in the table next to the
import path; a test checks that it matches each command's own docstring.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click

__all__ = ["LazyCommand", "LazyGroup"]


@dataclass(frozen=True, slots=True)
class LazyCommand:
    """Where a command lives ("module:attribute") and the one line `--help` shows for it."""

    import_path: str
    short_help: str


class LazyGroup(click.Group):
    """A group whose lazy commands are imported by `get_command`, listed without importing."""

    def __init__(self, *args: Any, lazy: Mapping[str, LazyCommand], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            self.add_command(self._load(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows: list[tuple[str, str]] = []
        for name in self.list_commands(ctx):
            entry = self.lazy.get(name)
            if entry is not None and name not in self.commands:
                rows.append((name, entry.short_help))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=formatter.width)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def _load(self, cmd_name: str) -> click.Command:
        module_name, _, attribute = self.lazy[cmd_name].import_path.partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module_name}:{attribute} is not a click command")
        return command
