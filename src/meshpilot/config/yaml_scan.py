"""Plain scalars inside flow collections as go-yaml (kubectl) scans them.

In `addresses: [1.2.3.4, 001:db8::]` kubectl reads the string `001:db8::`: inside `[...]`
and `{...}` go-yaml ends a plain scalar at `: `, at a line end or at `,?[]{}`, so a colon
before `]` or `,` is part of the scalar. libyaml stops with "found unexpected ':'" there
(and PyYAML's own scanner reads a one-pair mapping `{001:db8:: null}`). `FlowLoader`, the
pure-Python reader with go-yaml's rule, reads what libyaml refused for that reason only.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.tokens import ScalarToken

from meshpilot.config.yaml_resolve import read_tag

__all__ = ["FlowLoader", "needs_flow_loader"]

_BREAKS = "\0 \t\r\n\x85\u2028\u2029"
_FLOW_ENDS = ",?[]{}"


def needs_flow_loader(error: yaml.MarkedYAMLError) -> bool:
    """libyaml refused a colon inside a flow collection's plain scalar."""
    return error.problem == "found unexpected ':'"


class _GoScanner(yaml.scanner.Scanner):
    def scan_plain(self) -> ScalarToken:
        """PyYAML's plain scalar scan with go-yaml's end rule (see the module docstring)."""
        sc: Any = self  # the reader's methods, untyped in PyYAML's stubs
        chunks: list[str] = []
        start_mark = sc.get_mark()
        end_mark = start_mark
        indent = sc.indent + 1
        spaces: list[str] = []
        while True:
            length = 0
            if sc.peek() == "#":
                break
            while True:
                ch = sc.peek(length)
                if (
                    ch in _BREAKS
                    or (ch == ":" and sc.peek(length + 1) in _BREAKS)
                    or (sc.flow_level and ch in _FLOW_ENDS)
                ):
                    break
                length += 1
            if length == 0:
                break
            sc.allow_simple_key = False
            chunks.extend(spaces)
            chunks.append(sc.prefix(length))
            sc.forward(length)
            end_mark = sc.get_mark()
            spaces = sc.scan_plain_spaces(indent, start_mark) or []
            if not spaces or sc.peek() == "#" or (not sc.flow_level and sc.column < indent):
                break
        token: ScalarToken = ScalarToken("".join(chunks), True, start_mark, end_mark)
        return token


class FlowLoader(
    yaml.reader.Reader,
    _GoScanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    yaml.constructor.SafeConstructor,
    yaml.resolver.Resolver,
):
    """The pure-Python reader with go-yaml's plain scalars and kubectl's implicit tags."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        _GoScanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)

    def resolve(self, kind: type[yaml.Node], value: str, implicit: tuple[bool, bool]) -> str:
        if kind is yaml.ScalarNode and implicit[0]:
            return read_tag(value)
        return str(super().resolve(kind, value, implicit))  # type: ignore[no-untyped-call]
