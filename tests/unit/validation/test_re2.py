"""The RE2 approximation: what RE2 accepts passes, what RE2 rejects is reported with a reason."""

from __future__ import annotations

import pytest

from meshpilot.config.validation.re2 import MAX_REGEX_LENGTH, regex_error

HINT = "Istio uses RE2 syntax (https://github.com/google/re2/wiki/Syntax)"
VALID = [
    "^/api/v[0-9]+/.*$",
    r"\pL+",
    r"\p{Greek}\P{Han}",
    r"[[:alpha:]][[:^digit:]]",
    "(?P<id>[0-9]+)",
    "(?<id>[0-9]+)",  # RE2 accepts both named-group forms
    "(?i)case",
    "a(?i)b",  # flags in mid-pattern are fine in RE2
    "(?U)a*",
    "(?i:x)(?-s:y)",
    r"end\z",
    r"\Qa.b*c\E",
    r"\x{41}\x41",
    r"\C",
    "a{2,1000}",
    "a*?b+?c??",
    "[]a]",
    r"[\]]",
    "x{,3}",
]

INVALID = [
    ("a(?=b)", "lookahead (?=...) is not supported"),
    ("a(?!b)", "negative lookahead (?!...) is not supported"),
    ("(?<=a)b", "lookbehind (?<=...) is not supported"),
    ("(?<!a)b", "negative lookbehind (?<!...) is not supported"),
    (r"(a)\1", r"backreferences (\1) are not supported"),
    ("(?P<x>a)(?P=x)", "backreferences are not supported"),
    (r"(?P<x>a)\k<x>", r"backreferences (\k) are not supported"),
    ("(?>a)", "atomic groups (?>...) are not supported"),
    ("(a)?(?(1)b|c)", "conditional groups are not supported"),
    ("a*+", "possessive quantifiers (such as *+) are not supported"),
    ("a{2}+", "possessive quantifiers (such as *+) are not supported"),
    ("a{1001}", "bad repetition operator {1001}: counts above 1000"),
    (r"a\Z", r"\Z is not supported; use \z or $"),
    ("(?#note)a", "comments (?#...) are not supported"),
    ("(?x)a b", 'unknown flag "x" in (?x)'),
    ("[[:letters:]]", "invalid character class [:letters:]"),
    ("(", "missing ), unterminated subpattern"),
    ("[a", "unterminated character set"),
    ("*a", "nothing to repeat"),
    (r"[\d-z]", r"bad character range \d-z"),
]


@pytest.mark.parametrize("pattern", VALID)
def test_re2_syntax_is_accepted(pattern: str) -> None:
    assert regex_error(pattern) is None


@pytest.mark.parametrize(("pattern", "reason"), INVALID)
def test_what_re2_rejects_is_reported_with_its_reason(pattern: str, reason: str) -> None:
    message = regex_error(pattern)
    assert message is not None
    assert message.startswith("invalid regex ")
    assert f": {reason}; {HINT}" in message


def test_long_regexes_are_refused_as_istio_does() -> None:
    assert regex_error("a" * MAX_REGEX_LENGTH) is None
    assert regex_error("a" * (MAX_REGEX_LENGTH + 1)) == (
        "regex is too large, max length allowed is 1024"
    )
