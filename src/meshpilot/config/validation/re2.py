"""Does a regular expression compile in RE2, the engine Envoy and Istio use?

Python's `re` is only an approximation of RE2. A single scan rejects the constructs RE2
refuses (lookaround, backreferences, atomic and possessive groups, conditionals, `\\Z`,
repeat counts over 1000) and rewrites the RE2-only syntax Python lacks (`\\z`, `\\pL`,
`\\Q...\\E`, `[[:alpha:]]`, `(?<name>`, the `U` flag, flags in mid-pattern) into Python
equivalents. What is left is compiled by `re`, which reports the remaining syntax errors.
"""

from __future__ import annotations

import re
import warnings

from meshpilot.config.validation.common import quoted

__all__ = ["MAX_REGEX_LENGTH", "regex_error"]

MAX_REGEX_LENGTH = 1024
_MAX_REPEAT = 1000
_SYNTAX_URL = "https://github.com/google/re2/wiki/Syntax"
_POSIX_CLASSES = frozenset(
    {
        "alnum",
        "alpha",
        "ascii",
        "blank",
        "cntrl",
        "digit",
        "graph",
        "lower",
        "print",
        "punct",
        "space",
        "upper",
        "word",
        "xdigit",
    }
)
_REPEAT = re.compile(r"\{(\d+)(?:,(\d*))?\}")
_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")
_POSIX = re.compile(r"\[:(\^?)([a-z]*):\]")
_GROUP_PREFIXES = (
    ("(?=", "lookahead (?=...) is not supported"),
    ("(?!", "negative lookahead (?!...) is not supported"),
    ("(?<=", "lookbehind (?<=...) is not supported"),
    ("(?<!", "negative lookbehind (?<!...) is not supported"),
    ("(?>", "atomic groups (?>...) are not supported"),
    ("(?(", "conditional groups are not supported"),
    ("(?P=", "backreferences are not supported"),
    ("(?#", "comments (?#...) are not supported"),
)


class _Unsupported(Exception):
    """A construct RE2 rejects."""


def regex_error(pattern: str) -> str | None:
    """None if `pattern` is valid RE2 (as far as we can tell), else the reason it is not."""
    if len(pattern) > MAX_REGEX_LENGTH:
        return f"regex is too large, max length allowed is {MAX_REGEX_LENGTH}"
    try:
        translated = _Scanner(pattern).translate()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            re.compile(translated)
    except _Unsupported as exc:
        return f"invalid regex {quoted(pattern)}: {exc}; Istio uses RE2 syntax ({_SYNTAX_URL})"
    except (re.error, OverflowError, RecursionError, ValueError) as exc:
        reason = getattr(exc, "msg", None) or str(exc)
        return f"invalid regex {quoted(pattern)}: {reason}; Istio uses RE2 syntax ({_SYNTAX_URL})"
    return None


class _Scanner:
    """One left-to-right pass: check RE2 restrictions and emit Python syntax."""

    def __init__(self, pattern: str) -> None:
        self.src = pattern
        self.pos = 0
        self.out: list[str] = []
        self.in_class = False

    def translate(self) -> str:
        while self.pos < len(self.src):
            char = self.src[self.pos]
            if char == "\\":
                self._escape()
            elif self.in_class:
                self._class_char(char)
            elif char == "[":
                self._open_class()
            elif char == "(":
                self._group()
            elif char in "*+?":
                self._emit(char)
                self._after_quantifier()
            elif char == "{" and (repeat := _REPEAT.match(self.src, self.pos)):
                self._repeat(repeat)
            else:
                self._emit(char)
        return "".join(self.out)

    def _emit(self, text: str, consumed: int | None = None) -> None:
        self.out.append(text)
        self.pos += len(text) if consumed is None else consumed

    def _escape(self) -> None:
        nxt = self.src[self.pos + 1 : self.pos + 2]
        if nxt.isdigit() and nxt != "0" and not self.in_class:
            raise _Unsupported(f"backreferences (\\{nxt}) are not supported")
        if nxt in ("g", "k"):
            raise _Unsupported(f"backreferences (\\{nxt}) are not supported")
        if nxt == "Z":
            raise _Unsupported("\\Z is not supported; use \\z or $")
        if nxt == "z":
            self._emit("\\Z", 2)
        elif nxt == "C":
            self._emit(".", 2)
        elif nxt in ("p", "P"):
            self._unicode_class()
        elif nxt == "Q":
            self._quoted()
        elif nxt == "x" and self.src[self.pos + 2 : self.pos + 3] == "{":
            end = self.src.find("}", self.pos)
            if end < 0:
                raise _Unsupported("unterminated \\x{...} escape")
            self._emit("a", end + 1 - self.pos)
        else:
            self._emit(self.src[self.pos : self.pos + 2])

    def _unicode_class(self) -> None:
        start = self.pos + 2
        if self.src[start : start + 1] == "{":
            end = self.src.find("}", start)
            if end < 0:
                raise _Unsupported("unterminated \\p{...} class")
            self._emit("a", end + 1 - self.pos)
        elif start < len(self.src):
            self._emit("a", 3)
        else:
            raise _Unsupported("missing Unicode class name after \\p")

    def _quoted(self) -> None:
        end = self.src.find("\\E", self.pos + 2)
        literal = self.src[self.pos + 2 : end if end >= 0 else len(self.src)]
        consumed = (end + 2 if end >= 0 else len(self.src)) - self.pos
        self._emit(re.escape(literal) if literal else "", consumed)

    def _open_class(self) -> None:
        self.in_class = True
        self._emit("[")
        if self.src.startswith("^", self.pos):
            self._emit("^")
        if self.src.startswith("]", self.pos):
            self._emit("\\]", 1)  # a leading ] is a literal

    def _class_char(self, char: str) -> None:
        if char == "]":
            self.in_class = False
            self._emit("]")
            return
        if char == "[" and (posix := _POSIX.match(self.src, self.pos)):
            if posix.group(2) not in _POSIX_CLASSES:
                raise _Unsupported(f"invalid character class {posix.group(0)}")
            self._emit("a", posix.end() - self.pos)
            return
        self._emit("\\[" if char == "[" else char, 1)

    def _group(self) -> None:
        for prefix, reason in _GROUP_PREFIXES:
            if self.src.startswith(prefix, self.pos):
                raise _Unsupported(reason)
        if self.src.startswith("(?<", self.pos):
            self._emit("(?P<", 3)  # RE2 accepts both (?<name> and (?P<name>
            return
        flags = _FLAGS.match(self.src, self.pos)
        if flags is None:
            self._emit("(")
            return
        on, off, end = flags.group(1), flags.group(2) or "", flags.group(3)
        bad = set(on + off) - set("imsU")
        if bad:
            raise _Unsupported(f"unknown flag {quoted(''.join(sorted(bad)))} in {flags.group(0)}")
        on, off = on.replace("U", ""), off.replace("U", "")
        if end == ")":
            self._emit("", flags.end() - self.pos)  # a flag change; irrelevant to validity
            return
        spec = on + (f"-{off}" if off else "")
        self._emit(f"(?{spec}:", flags.end() - self.pos)

    def _repeat(self, match: re.Match[str]) -> None:
        low, high = match.group(1), match.group(2)
        for count in (low, high):
            if count and int(count) > _MAX_REPEAT:
                raise _Unsupported(f"bad repetition operator {match.group(0)}: counts above 1000")
        self._emit(match.group(0))
        self._after_quantifier()

    def _after_quantifier(self) -> None:
        if self.src.startswith("?", self.pos):
            self._emit("?")  # lazy
        if self.src.startswith("+", self.pos):
            raise _Unsupported("possessive quantifiers (such as *+) are not supported")
