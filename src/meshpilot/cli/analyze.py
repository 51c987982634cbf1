"""`meshpilot analyze`: istioctl analyze for meshpilot's inputs.

Findings go to stdout in istioctl's form (so `analyze -f x > report.txt` keeps them), the
summary and the closing line to stderr. Exit codes are istioctl's: 79 when a finding is at
or above --failure-threshold, 65 when nothing is but an input could not be parsed (both
with the log output only, as istioctl), 64 for a wrong option, 1 for any other failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from meshpilot.cli.analyze_output import LEVELS, OUTPUTS, render_findings, summary
from meshpilot.config.diagnostics import Diagnostic, Severity
from meshpilot.errors import MeshpilotError

if TYPE_CHECKING:
    from meshpilot.cli.analyze_inputs import Inputs
    from meshpilot.config.objects import ConfigObject

__all__ = ["EXIT_FOUND_ISSUES", "EXIT_PARSE_ERROR", "EXIT_USAGE", "analyze"]

EXIT_USAGE = 64  # istioctl's ExitIncorrectUsage
EXIT_PARSE_ERROR = 65  # ExitDataError: some input could not be parsed
EXIT_FOUND_ISSUES = 79  # ExitAnalyzerFoundIssues
ANALYSIS_DOCS = "https://istio.io/latest/docs/reference/config/analysis"
_ORDER = list(LEVELS)  # Info, Warning, Error


class _UsageError(click.UsageError):
    exit_code = EXIT_USAGE  # istioctl's, rather than click's 2


class _AnalyzeCommand(click.Command):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            if isinstance(exc, _UsageError):
                raise
            raise _UsageError(exc.format_message(), exc.ctx) from exc


_LEVEL = click.Choice(list(LEVELS.values()), case_sensitive=False)


@click.command(cls=_AnalyzeCommand)
@click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    metavar="PATH",
    help="YAML/JSON file or directory (repeatable; directories are read recursively).",
)
@click.option(
    "--store",
    "store_dir",
    metavar="DIR",
    help="Analyze the live store in this directory (with -f: as if the files were applied).",
)
@click.option(
    "--discovery",
    metavar="ADDR",
    help="Analyze what a running control plane serves, read from its monitoring port "
    "(host:15014, /debug/objectz); with -f: as if the files were applied.",
)
@click.option(
    "-o", "--output", type=click.Choice(OUTPUTS), default="log", show_default=True,
    help="log: one line per finding, as istioctl; json or yaml: code, level, message, "
    "origin, reference, documentationUrl and field.",
)  # fmt: skip
@click.option(
    "-S",
    "--suppress",
    "suppress",
    multiple=True,
    metavar="CODE=KIND NAME[.NS]",
    help="Hide a message code on matching resources (repeatable; `*` globs), e.g. "
    '"IST0102=Namespace foo". The galley.istio.io/analyze-suppress annotation works too.',
)
@click.option(
    "--failure-threshold", type=_LEVEL, default="Error", show_default=True,
    help="The level at and above which findings make the exit code 79.",
)  # fmt: skip
@click.option(
    "--output-threshold", type=_LEVEL, default="Info", show_default=True,
    help="The level at and above which findings are printed.",
)  # fmt: skip
@click.option(
    "-n", "--namespace", metavar="NS",
    help="Report only findings on objects of this namespace (and on cluster-scoped objects "
    "and inputs), and put objects of files that name no namespace in it; every object is "
    "still read. Default: all namespaces (objects without one in `default`).",
)  # fmt: skip
@click.option(
    "-A", "--all-namespaces", "all_namespaces", is_flag=True,
    help="Report findings in every namespace (the default; wins over -n, as istioctl).",
)  # fmt: skip
@click.option(
    "--timeout", type=click.FloatRange(min=0.1), default=5.0, show_default=True,
    metavar="SECONDS", help="How long to wait for the control plane (--discovery).",
)  # fmt: skip
def analyze(
    filenames: tuple[str, ...],
    store_dir: str | None,
    discovery: str | None,
    output: str,
    suppress: tuple[str, ...],
    failure_threshold: str,
    output_threshold: str,
    namespace: str | None,
    all_namespaces: bool,
    timeout: float,
) -> None:
    """Report invalid objects, broken references and unsupported fields (istioctl analyze)."""
    from meshpilot.analysis.suppress import parse_suppression, unsuppressed
    from meshpilot.cli.analyze_inputs import read_inputs

    if not (filenames or store_dir or discovery):
        raise _UsageError(
            "give files (-f PATH), a live store (--store DIR) or a control plane "
            "(--discovery ADDR) to analyze"
        )
    if store_dir and discovery:
        raise _UsageError("--store and --discovery are two sources; give one of them")
    try:
        rules = [parse_suppression(text) for text in suppress]
        inputs = read_inputs(filenames, store_dir, discovery, timeout, namespace or "default")
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc
    _warn_unknown_codes(rule.code for rule in rules)
    objects = [inputs.objects[key] for key in sorted(inputs.objects)]
    found = unsuppressed(_findings(objects, inputs), rules, objects)
    selected = None if all_namespaces else namespace
    if selected:
        # istioctl's filterMessages: a finding on another namespace's object is dropped.
        found = [d for d in found if d.namespace in ("", selected)]
        inputs.targets.append(f"namespace: {selected}")
    shown = [d for d in found if _at_least(d.severity, output_threshold)]
    text = render_findings(shown, output)
    if text or output != "log":
        click.echo(text)
    click.echo(summary(len(objects), shown), err=True)
    target = " and ".join(inputs.targets)
    if not shown:
        click.echo(f"\u2714 No validation issues found when analyzing {target}.", err=True)
    if output != "log":
        return  # istioctl sets no exit code for json and yaml
    unparsed = [d for d in found if d.code == "MP0001"]
    if any(_at_least(d.severity, failure_threshold) for d in found if d not in unparsed):
        click.echo(
            f"Error: Analyzers found issues when analyzing {target}.\nSee {ANALYSIS_DOCS} "
            "for more information about causes and resolutions.",
            err=True,
        )
        raise SystemExit(EXIT_FOUND_ISSUES)
    if unparsed:
        click.echo("Error: Some files couldn't be parsed.", err=True)
        raise SystemExit(EXIT_PARSE_ERROR)


def _findings(objects: list[ConfigObject[Any]], inputs: Inputs) -> list[Diagnostic]:
    """Every finding with its code: loading's problems, the analyzers', unsupported fields."""
    from meshpilot.analysis import analyze as analyze_push
    from meshpilot.analysis.load_findings import coded, coded_load_diagnostics, with_field
    from meshpilot.analysis.unsupported_fields import unsupported_field_diagnostics
    from meshpilot.model.push_context import build_push_context

    push = build_push_context(objects, inputs.mesh)
    unsupported = unsupported_field_diagnostics(objects, inputs.mesh, inputs.mesh_origin)
    return [
        *coded_load_diagnostics(inputs.diagnostics),
        *analyze_push(push),
        # a field parsed and ignored (MP0003), or an object of a kind not applied yet (MP0010)
        *(
            coded(replace(d, message=with_field(d)), "MP0003") if d.field else coded(d, "MP0010")
            for d in unsupported
        ),
    ]


def _at_least(severity: Severity, threshold: str) -> bool:
    return _ORDER.index(severity) >= [v.lower() for v in LEVELS.values()].index(threshold.lower())


def _warn_unknown_codes(codes: Iterable[str]) -> None:
    from meshpilot.analysis.messages import MESSAGES

    for code in codes:
        if code not in MESSAGES:
            click.echo(
                f"Warning: Supplied message code '{code}' is an unknown message code and will "
                "not have any effect.",
                err=True,
            )
