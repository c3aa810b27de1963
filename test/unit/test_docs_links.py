"""The documentation holds together: every relative link in README.md, docs/*.md and
tools/patch/README.md points to a file or folder that exists (and, into a Markdown page, to a
heading it has), the README links every docs page and stays short, and every docs page opens
with a title and a summary paragraph."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    REPO / "tools" / "patch" / "README.md",
]
README_MAX_LINES = 250

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # https:, mailto:, ...
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The text outside code blocks and code spans, where a link is a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated heading suffixed -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for title in HEADING.findall(FENCE.sub("", text)):
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` whose target does not exist, or names a missing heading."""
    text = page.read_text()
    broken = []
    for target in LINK.findall(prose(text)):
        if SCHEME.match(target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == [], f"{page.relative_to(REPO)}: broken links"


def test_the_checker_finds_missing_files_and_headings(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## A `knob`: its table\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## Here\n\n"
        "[ok](other.md) [ok](other.md#a-knob-its-table) [ok](#here) [ok](.)\n"
        "[web](https://example.com/none.md) `[code](missing.md)`\n"
        "```\n[fenced](missing.md)\n```\n"
        "[gone](missing.md) [gone](other.md#nowhere) [gone](#not-here)\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nowhere: no heading #nowhere in other.md",
        "#not-here: no heading #not-here in page.md",
    ]


def test_readme_links_every_docs_page():
    linked = {
        (REPO / target.partition("#")[0]).resolve()
        for target in LINK.findall(prose((REPO / "README.md").read_text()))
    }
    missing = [p.name for p in PAGES if p.parent == REPO / "docs" and p.resolve() not in linked]
    assert missing == [], f"README.md does not link these docs pages: {missing}"


def test_readme_starts_with_the_quick_start_and_stays_short():
    lines = (REPO / "README.md").read_text().splitlines()
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[0] == "## Quick start", headings
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move the detail to docs/"
    )


@pytest.mark.parametrize(
    "page", [p for p in PAGES if p.parent == REPO / "docs"], ids=lambda p: p.name
)
def test_docs_page_opens_with_a_title_and_a_summary(page):
    blocks = page.read_text().split("\n\n")
    assert blocks[0].startswith("# ") and "\n" not in blocks[0], f"{page.name}: no title line"
    summary = blocks[1]
    assert not summary.startswith(("#", "```", "|", "- ", "<!--")), (
        f"{page.name}: the title is not followed by a summary paragraph"
    )
