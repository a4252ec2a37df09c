"""The doc test's extractor (tests/utils/doc_examples.py) on every page and on made-up
pages: markers are honoured, a marker without its reason and a JSON block without a marker
are refused by page and line, and a block that shows a file is that file, verbatim."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.utils.doc_examples import Example, MarkerError, examples, json_keys, section

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_page_s_markers_are_honoured(page: Path) -> None:
    for example in examples(page):
        assert example.kind != "not run" or example.note, example.where


def test_a_block_that_shows_a_file_is_that_file() -> None:
    shown = [e for page in PAGES for e in examples(page) if e.kind == "file"]
    assert shown, "docs/producers.md shows examples/node/producer.js"
    for example in shown:
        assert example.body + "\n" == (ROOT / example.note).read_text(), example.where


def test_markers_languages_and_lines(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    text = ("# Title\n\n```sh\necho one\n```\n\n<!-- not run: needs a cluster -->\n```sh\n"
            "kubectl get pods\n```\n<!-- output -->\n```json\n{\"a\": 1, ...}\n```\n"
            "```ini\nx = 1\n```\n<!-- background: until ready -->\n```python\nprint()\n```\n"
            "```console\n$ echo two\ntwo\n```\n")
    found = examples(page, text)
    assert [(e.line, e.language, e.kind, e.note) for e in found] == [
        (3, "sh", "run", ""), (8, "sh", "not run", "needs a cluster"),
        (12, "json", "output", ""), (19, "python", "background", "until ready"),
        (22, "console", "run", "")]
    assert found[-1].commands() == "echo two"
    assert json_keys(found[2].body) == {"a"}


@pytest.mark.parametrize("text,complaint", [
    ("<!-- not run -->\n```sh\nls\n```\n", "page.md:2: <!-- not run: ... --> needs its text"),
    ("\n```json\n{}\n```\n", "page.md:2: a JSON block is an answer"),
    ("```sh\nls\n", "page.md:1: a code fence is never closed"),
])
def test_what_the_doc_test_cannot_honour_is_refused(text: str, complaint: str) -> None:
    with pytest.raises(MarkerError, match=complaint.replace("(", r"\(").replace(".", r"\.")):
        examples(Path("page.md"), text)


def test_the_readme_gives_only_its_tour() -> None:
    readme = ROOT / "README.md"
    tour = examples(readme, section(readme.read_text(), "## Using it"))
    assert all(isinstance(e, Example) for e in tour)
    assert tour[0].body == "bash deploy/run.sh" and len(tour) == 4
    assert all(e.line > readme.read_text().splitlines().index("## Using it") for e in tour)
