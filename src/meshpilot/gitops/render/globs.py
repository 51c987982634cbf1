"""Argo CD directory include/exclude globs: `*`, `?`, `[...]`, `**` and `{a,b}` braces.

Patterns match the file path relative to the source path; `*` stays within one path
segment, `**` crosses segments.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["expand_braces", "glob_match"]


def expand_braces(pattern: str) -> list[str]:
    start = pattern.find("{")
    if start < 0:
        return [pattern]
    depth = 0
    for end in range(start, len(pattern)):
        if pattern[end] == "{":
            depth += 1
        elif pattern[end] == "}":
            depth -= 1
            if depth == 0:
                break
    else:
        return [pattern]
    options, level, current = [], 0, ""
    for ch in pattern[start + 1 : end]:
        if ch == "," and level == 0:
            options.append(current)
            current = ""
            continue
        level += (ch == "{") - (ch == "}")
        current += ch
    options.append(current)
    head, tail = pattern[:start], pattern[end + 1 :]
    return [x for opt in options for x in expand_braces(head + opt + tail)]


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
            continue
        if pattern.startswith("**", i):
            out, i = out + ".*", i + 2
            continue
        if ch == "*":
            out += "[^/]*"
        elif ch == "?":
            out += "[^/]"
        elif ch == "[":
            close = pattern.find("]", i + 1)
            if close < 0:
                out += re.escape(ch)
            else:
                body = pattern[i + 1 : close].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out += f"[{body}]"
                i = close
        else:
            out += re.escape(ch)
        i += 1
    return re.compile(out + r"\Z")


def glob_match(pattern: str, path: str) -> bool:
    return any(_regex(p).match(path) for p in expand_braces(pattern))
