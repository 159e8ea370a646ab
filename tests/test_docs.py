"""The docs cannot drift: every setting documented once, every link and anchor there."""

import re

import pytest

from bench.processes import ROOT
from bridge import settings

DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "bench" / "README.md"])
ROW = re.compile(r"^\| `(BRIDGE_[A-Z0-9_]+)` \|", re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path):
    """GitHub's anchors of a Markdown file's headings (code blocks left out)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", text, re.M)
    }


def test_every_setting_has_one_row_in_the_docs_and_every_row_is_a_setting():
    rows = [name for doc in DOCS for name in ROW.findall(doc.read_text())]
    assert sorted(set(rows)) == sorted(settings.VARIABLES), "documented vs read by bridge/settings.py"
    assert sorted(name for name in set(rows) if rows.count(name) > 1) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_names_a_file_and_heading_that_exist(doc):
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path).resolve() if path else doc
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    assert broken == []


def test_the_readme_is_a_ten_minute_read():
    """The reference lives in docs/; the README is what a newcomer reads first."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300
