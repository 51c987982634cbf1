"""What loading said about the inputs, as analyzer messages with codes, the way istioctl
reports schema problems:

- an object that fails validation: IST0106 "Schema validation error: <field>: ..." for each
  error, IST0133 "Schema validation warning: <field>: ..." for each warning;
- an invalid regular expression in a VirtualService match or CORS origin: also IST0122, as
  Istio's virtualservice.RegexAnalyzer reports it next to the validation error;
- the VirtualService validation warnings Istio gives codes to: a rule that is never used
  (IST0130) and a match that repeats an earlier one (IST0131, Info);
- a kind meshpilot ignores (outside Istio's API groups, or not supported yet): MP0002;
- a document that is no object at all (YAML syntax, no kind): MP0001.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Iterator

from meshpilot.analysis.findings import quoted
from meshpilot.analysis.messages import level_of
from meshpilot.config.diagnostics import Diagnostic, Severity

__all__ = ["coded", "coded_load_diagnostics", "with_field"]

# spec.http[0].match[1].uri.regex, ...match[0].headers.x-user.regex,
# spec.http[0].corsPolicy.allowOrigins[2].regex
_MATCH_REGEX = re.compile(
    r"^spec\.http\[\d+\]\.(?:match\[\d+\]\.(uri|scheme|method|authority|headers|queryParams)"
    r"(?:\.[^.]+)?|(corsPolicy\.allowOrigins)\[\d+\])\.regex$"
)
# The validation warnings of unused rules and matches (config/validation/virtual_service.py).
_UNUSED_RULE = re.compile(r"^rule (\S+) is not used(?:: | \()(.*?)\)?$")
_UNUSED_MATCH = re.compile(
    r"^rule (\S+) match (\S+) is not used \(duplicate match in rule (\S+)\)$"
)
# The validation message of an invalid RE2 pattern (config/validation/re2.py).
_REGEX_PROBLEM = re.compile(r'^invalid regex ("(?:[^"\\]|\\.)*"): (.*?)(?:; Istio uses RE2 .*)?$')


def coded(diag: Diagnostic, code: str) -> Diagnostic:
    """`diag` under `code`, at that code's level."""
    return dataclasses.replace(diag, code=code, severity=level_of(code))


def coded_load_diagnostics(diagnostics: Iterable[Diagnostic]) -> Iterator[Diagnostic]:
    for diag in diagnostics:
        if diag.code:
            yield diag
        elif not diag.kind:
            yield coded(diag, "MP0001")
        elif diag.field == "kind" and diag.severity is not Severity.ERROR:
            yield coded(diag, "MP0002")  # ignored: outside Istio's groups, or not supported yet
        elif diag.severity is Severity.ERROR:
            message = f"Schema validation error: {with_field(diag)}"
            yield coded(dataclasses.replace(diag, message=message), "IST0106")
            yield from _invalid_regex(diag)
        else:
            yield _warning(diag)


def _warning(diag: Diagnostic) -> Diagnostic:
    if diag.kind == "VirtualService":
        match = _UNUSED_MATCH.match(diag.message)
        if match:
            rule, which, earlier = match.groups()
            message = (
                f"VirtualService rule {rule} match {which} is not used (duplicate/overlapping "
                f"match in rule {earlier})."
            )
            return coded(dataclasses.replace(diag, message=message), "IST0131")
        match = _UNUSED_RULE.match(diag.message)
        if match:
            rule, reason = match.groups()
            message = f"VirtualService rule {rule} not used ({reason})."
            return coded(dataclasses.replace(diag, message=message), "IST0130")
    message = f"Schema validation warning: {with_field(diag)}"
    return coded(dataclasses.replace(diag, message=message), "IST0133")


def with_field(diag: Diagnostic) -> str:
    """The message led by the field it is about, as istioctl's line has no place for it."""
    return f"{diag.field}: {diag.message}" if diag.field else diag.message


def _invalid_regex(diag: Diagnostic) -> Iterator[Diagnostic]:
    if diag.kind != "VirtualService":
        return
    where = _MATCH_REGEX.match(diag.field)
    problem = _REGEX_PROBLEM.match(diag.message)
    if where is None or problem is None:
        return
    pattern = json.loads(problem.group(1))
    field = where.group(1) or where.group(2)
    yield coded(
        dataclasses.replace(
            diag,
            message=f"Field {quoted(field)} regular expression invalid: {quoted(pattern)} "
            f"({problem.group(2)})",
        ),
        "IST0122",
    )
