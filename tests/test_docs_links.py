"""The README and docs/ stay navigable: every relative link resolves to a file of the
repository (and its #anchor to a heading there), and the README stays short."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
README_MAX_LINES = 300

# [text](target) outside code; images too. Targets with a scheme are not ours to check.
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^(```|~~~)")
_CODE_SPAN = re.compile(r"`[^`]*`")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """Lines outside fenced and indented code blocks, with code spans blanked."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            continue
        lines.append((number, _CODE_SPAN.sub("``", line)))
    return lines


def _links(page: Path) -> list[tuple[int, str]]:
    return [
        (number, match.group(1))
        for number, line in _prose_lines(page.read_text(encoding="utf-8"))
        for match in _LINK.finditer(line)
    ]


def _anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens, and -1, -2
    for repeats."""
    seen: dict[str, int] = {}
    anchors = set()
    for _, line in _prose_lines(page.read_text(encoding="utf-8")):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1))
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _problem(page: Path, target: str) -> str | None:
    if _SCHEME.match(target):
        return None
    path_part, _, anchor = target.partition("#")
    resolved = (page.parent / path_part).resolve() if path_part else page
    try:
        resolved.relative_to(ROOT)
    except ValueError:
        return f"{target} points outside the repository"
    if not resolved.exists():
        return f"{target}: no such file"
    if anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
        return f"{target}: no heading #{anchor} in {resolved.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    problems = [
        f"{page.relative_to(ROOT)}:{number}: {problem}"
        for number, target in _links(page)
        if (problem := _problem(page, target))
    ]
    assert not problems, "\n".join(problems)


def test_the_docs_have_links_to_check() -> None:
    # Guards the link pattern itself: the README links into docs/.
    assert any(target.startswith("docs/") for _, target in _links(ROOT / "README.md"))


def test_readme_stays_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines < README_MAX_LINES, (
        f"README.md has {lines} lines; keep it under {README_MAX_LINES} and move detail to docs/"
    )


def test_no_page_points_outside_the_repository_in_prose() -> None:
    # Paths such as ../shared/ are not links but still send a reader outside the clone.
    offenders = [
        f"{page.relative_to(ROOT)}:{number}"
        for page in PAGES
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if "../shared" in line
    ]
    assert not offenders, offenders


def test_the_checker_finds_a_missing_file_and_a_missing_anchor(tmp_path: Path) -> None:
    page = ROOT / "docs" / "cli.md"
    assert _problem(page, "architecture.md#where-to-add-things") is None
    assert _problem(page, "no-such-page.md") == "no-such-page.md: no such file"
    assert "no heading #nowhere" in (_problem(page, "architecture.md#nowhere") or "")
    assert "outside the repository" in (_problem(page, "../../x.md") or "")
    assert _problem(page, "https://istio.io/") is None
