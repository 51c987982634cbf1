"""`meshpilot --help` and `meshpilot version` import no command module (they must start fast)."""

from __future__ import annotations

import subprocess
import sys

import click
from click.testing import CliRunner

from meshpilot.cli.main import COMMANDS, cli

# Runs the CLI in a fresh interpreter, then prints which heavy modules got imported.
PROBE = (
    "import sys\n"
    "from click.testing import CliRunner\n"
    "from meshpilot.cli.main import cli\n"
    "result = CliRunner().invoke(cli, sys.argv[1:])\n"
    "print(result.output)\n"
    "heavy = ('grpc', 'pydantic', 'cryptography', 'meshpilot.gitops', 'meshpilot.xds',"
    " 'meshpilot.config.models', 'meshpilot.cli.translate', 'envoy')\n"
    "print('IMPORTED', sorted({m.split('.')[0] if not m.startswith('meshpilot') else m"
    " for m in sys.modules if m.startswith(heavy)}))\n"
)


def probe(*args: str) -> tuple[str, str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True
    )
    output, _, imported = result.stdout.rpartition("IMPORTED ")
    return output, imported.strip()


def test_help_lists_every_command_without_importing_any() -> None:
    output, imported = probe("--help")
    assert imported == "[]"
    for name, entry in COMMANDS.items():
        assert f"  {name}" in output and entry.short_help[:30] in output
    assert "version" in output


def test_version_imports_nothing_heavy() -> None:
    output, imported = probe("version", "--ca-dir", "/nonexistent")
    assert imported == "[]"
    assert output.startswith("client version: 1.")  # istioctl's lines
    assert "control plane version: no control plane running" in output


def test_every_lazy_entry_is_the_command_of_that_name() -> None:
    for name in COMMANDS:
        command = cli.get_command(click.Context(cli), name)
        assert isinstance(command, click.Command) and command.name == name, name
        help_page = CliRunner().invoke(cli, [name, "--help"], prog_name="meshpilot")
        assert help_page.exit_code == 0 and f"meshpilot {name}" in help_page.output


def test_proxy_commands_load_neither_object_models_nor_cryptography() -> None:
    for args in (("proxy-status", "--help"), ("proxy-config", "clusters", "--help")):
        output, imported = probe(*args)
        assert "Usage: " in output
        assert not any(
            name in imported
            for name in ("pydantic", "cryptography", "grpc", "meshpilot.gitops", "envoy")
        ), (args, imported)
