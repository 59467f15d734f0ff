"""Every relative link in README.md, docs/*.md and the deploy and SDK READMEs points at a file that exists, and a link to a
heading (`page.md#heading`, `#heading`) at a heading that exists, as GitHub names its anchors.
Links to the web are not followed; code blocks and inline code are not links."""

from pathlib import Path
import re

import pytest

ROOT = Path(__file__).resolve().parents[2]


FENCE = re.compile(r"^(```|~~~)")
INLINE_CODE = re.compile(r"`[^`\n]*`")
# [text](target) or [text](target "title"); images too. Targets hold no spaces or parentheses.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            ROOT / "deploy/README.md", ROOT / "sdk/python/README.md"]


def prose_lines(text: str):
    """The lines outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped (letters,
    digits, spaces, hyphens and underscores kept), spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose_lines(page.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    found = []
    for line in prose_lines(page.read_text(encoding="utf-8")):
        found += LINK.findall(INLINE_CODE.sub("", line))
    return found


def is_external(target: str) -> bool:
    return re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) is not None


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for target in links(page):
        if is_external(target):
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        rel = dest.relative_to(root).as_posix() if dest.is_relative_to(root) else str(dest)
        if not dest.exists():
            broken.append(f"{target}: no {rel}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {rel}")
    return broken


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_readme_links_into_docs():
    targets = links(ROOT / "README.md")
    for page in ["docs/operating.md", "docs/backends.md", "docs/design.md",
                 "docs/benchmarks.md", "docs/testing.md"]:
        assert page in targets, f"README.md does not link {page}"


def test_a_missing_file_and_a_missing_heading_are_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/a.md").write_text("# A page\n\n## Some `code` heading\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md) [ok](docs/a.md#some-code-heading) [ok](#top) [web](https://x.org/y)\n"
        "[gone](docs/b.md) [no heading](docs/a.md#nope)\n"
        "`[not a link](nowhere.md)`\n"
        "```\n[not a link either](nowhere.md)\n```\n"
        "# Top\n"
    )
    assert broken_links(page, root=tmp_path) == [
        "docs/b.md: no docs/b.md",
        "docs/a.md#nope: no heading #nope in docs/a.md",
    ]
