"""The documentation, checked: README.md stays a front page, every internal link and anchor
in README.md, CONTRIBUTING.md and docs/*.md resolves, every fenced JSON example parses,
every `flow-config` command on a page is one flow-config accepts, every Python example
compiles, and every section of the README as it was before the split (issue 23) is still a
heading on some page. The route table of docs/api.md is checked against the app in
tests/api/test_documented_routes.py."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flow_sidecar_client.flowconfig import _parser as flow_config_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 320

# Every `## ` and `### ` heading of README.md on main at 7a49d94, before the split: each
# section must still be a heading on some page, so that nothing is dropped on the way.
OLD_README_HEADINGS = [
    "Two commands", "Layout", "Using it", "Where thresholds come from", "API", "Options",
    "Live depth", "RabbitMQ notes", "Speed", "Webhooks", "Broker-wide flow control",
    "Vhost quotas", "Broker alarms", "Why a queue is stopped", "Security and limits",
    "Several replicas: shared state", "Metrics and dashboard", "For producer authors",
    "Credit grants", "Qpid brokers", "Qpid C++ (qpidd)",
    "Differential conformance against qpidd", "Set-up and tests", "Broker-J",
    "Run on Kubernetes", "Run on a Linux host", "Analysing flow history",
]
# sections main's README gained while it was being split (merged into docs/ since)
LATER_README_HEADINGS = ["RabbitMQ 4.x"]

FENCE = re.compile(r"^```(\w*)\s*$")
HEADING = re.compile(r"^(#{1,6}) +(.+?) *#*$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?: \"[^\"]*\")?\)")


def json_example(body: str) -> Any:
    """A page's JSON block, parsed: answers may elide fields with `, ...`."""
    return json.loads(re.sub(r",\s*\.\.\.", "", body))


def blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a page: (language, body)."""
    found: list[tuple[str, str]] = []
    language: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        fence = FENCE.match(line)
        if language is None and fence:
            language, body = fence.group(1), []
        elif language is not None and line.strip() == "```":
            found.append((language, "\n".join(body)))
            language = None
        elif language is not None:
            body.append(line)
    assert language is None, "a code fence is never closed"
    return found



def shell_lines(pages: list[Path]) -> Iterator[tuple[str, list[str]]]:
    """(page name, words) of every line of the pages' `sh` blocks, continuation lines
    joined, comments left out."""
    for page in pages:
        for language, body in blocks(page.read_text()):
            if language == "sh":
                for line in body.replace("\\\n", " ").splitlines():
                    yield page.name, shlex.split(line, comments=True)

def prose(text: str) -> list[str]:
    """The lines of a page outside fenced code blocks."""
    lines: list[str] = []
    inside = False
    for line in text.splitlines():
        if FENCE.match(line) or (inside and line.strip() == "```"):
            inside = not inside
            continue
        if not inside:
            lines.append(line)
    return lines


def headings(text: str) -> list[str]:
    return [m.group(2) for line in prose(text) if (m := HEADING.match(line))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lower case, without punctuation,
    spaces as hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    result: set[str] = set()
    for heading in headings(page.read_text()):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


def links(page: Path) -> list[str]:
    """Every link target of a page's prose, inline code left out."""
    text = "\n".join(re.sub(r"`[^`]*`", "", line) for line in prose(page.read_text()))
    return LINK.findall(text)


def test_slugs_follow_github() -> None:
    assert slug("Qpid C++ (qpidd)") == "qpid-c-qpidd"
    assert slug("Several replicas: shared state") == "several-replicas-shared-state"
    assert slug("Say who you are: producer headers and `overflowRisk`") == \
        "say-who-you-are-producer-headers-and-overflowrisk"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_internal_link_and_anchor_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved.relative_to(ROOT)}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
        elif anchor and resolved.suffix != ".md":
            broken.append(f"{target}: an anchor into a file that is not a page")
    assert broken == []


DOCS_SECTION = re.compile(r"docs/([\w-]+\.md)#([\w-]+)")


def test_every_docs_section_the_code_names_exists() -> None:
    """A comment's `docs/benchmarks.md#soak` is a heading of that page: the code links the
    figures instead of quoting them, and a renamed section must take its links along."""
    broken = []
    for folder in ("sidecar", "api", "client", "pipeline", "bench", "deploy"):
        for source in sorted((ROOT / folder).rglob("*")):
            if source.suffix not in (".py", ".sh", ".service", ".conf") or not source.is_file():
                continue
            for page, anchor in DOCS_SECTION.findall(source.read_text()):
                target = ROOT / "docs" / page
                if not target.exists() or anchor not in anchors(target):
                    broken.append(f"{source.relative_to(ROOT)}: docs/{page}#{anchor}")
    assert broken == []


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    """The checker itself can fail: a missing page and a missing anchor are both found."""
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[a](missing.md) [b](#nowhere) [c](#title) `[d](no.md)`\n"
                    "```sh\n[e](no.md)\n```\n")
    assert links(page) == ["missing.md", "#nowhere", "#title"]
    assert "nowhere" not in anchors(page) and "title" in anchors(page)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_json_example_parses(page: Path) -> None:
    for language, body in blocks(page.read_text()):
        if language == "json":
            json_example(body)


def test_there_are_json_examples() -> None:
    assert sum(language == "json" for page in PAGES
               for language, _ in blocks(page.read_text())) >= 2


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_example_compiles(page: Path) -> None:
    for language, body in blocks(page.read_text()):
        if language == "python":
            ast.parse(body)


def flow_config_commands() -> list[tuple[str, str]]:
    """Every `flow-config ...` command in a page's shell blocks, continuation lines
    joined, with what follows a `#` comment left out."""
    found = []
    for name, words in shell_lines(PAGES):
        for i, word in enumerate(words):
            if word.endswith("bin/flow-config") or word == "flow-config":
                found.append((name, shlex.join(words[i + 1:])))
                break
    return found


def test_pages_show_flow_config_commands() -> None:
    assert len(flow_config_commands()) >= 6


@pytest.mark.parametrize("page,command", flow_config_commands())
def test_every_flow_config_command_is_accepted(page: str, command: str) -> None:
    try:
        flow_config_parser().parse_args(shlex.split(command))
    except SystemExit:
        pytest.fail(f"{page}: flow-config {command}: refused (its message is above)")


def test_readme_is_a_front_page_with_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    shell = [body.strip() for language, body in blocks(text) if language == "sh"]
    assert "bash deploy/run.sh" in shell
    assert "bash deploy/test.sh" in shell
    # CI runs the README's test command, nothing else
    assert "exec bash deploy/test.sh" in (ROOT / ".ci/run").read_text()


def test_readme_maps_every_docs_page() -> None:
    mapped = {target for target in links(README) if target.startswith("docs/")}
    pages = {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")}
    assert pages <= mapped


def test_every_old_readme_section_is_still_a_heading() -> None:
    now = {heading for page in PAGES for heading in headings(page.read_text())}
    assert [h for h in OLD_README_HEADINGS + LATER_README_HEADINGS if h not in now] == []


def test_every_docs_page_opens_with_a_title_and_the_task() -> None:
    for page in (ROOT / "docs").glob("*.md"):
        lines = page.read_text().splitlines()
        assert lines[0].startswith("# "), page.name
        first_paragraph = next(line for line in lines[1:] if line.strip())
        assert not first_paragraph.startswith(("#", "|", "```")), page.name


def module_tree() -> set[str]:
    """The files and folders CONTRIBUTING.md's module tree names under sidecar/ and api/."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    section = text[text.index("## Modules"):]
    tree = next(body for language, body in blocks(section) if language == "")
    named: set[str] = set()
    parents: list[str] = []
    for line in tree.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        field = re.split(r" {2,}", line.strip())[0] if line.strip() else ""
        if not field or indent % 2 or " " in field.replace(", ", ","):
            continue  # a description carried over, or a line of several folders
        depth = indent // 2
        if depth == 0:
            parents = []
        parents = parents[:depth]
        if depth and len(parents) < depth:
            continue
        base = "".join(parents)
        for name in field.split(", "):
            named.add(base + name)
        if field.endswith("/"):
            parents.append(field)
    return {n for n in named if n.startswith(("sidecar/", "api/"))}


def test_the_module_tree_names_every_module_and_only_real_ones() -> None:
    named = module_tree()
    assert [n for n in sorted(named) if not (ROOT / n).exists()] == []
    modules = {str(p.relative_to(ROOT)) for folder in ("sidecar", "api")
               for p in (ROOT / folder).rglob("*.py")
               if p.name != "__init__.py" and "routes" not in p.parts}
    assert sorted(modules - named) == []


REPO_PATH = re.compile(r"`((?:sidecar|api|client|pipeline|tests|bench|deploy|helm|docs)/[^`\s]*)`")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_a_page_names_exists(page: Path) -> None:
    """`deploy/rabbitmq.conf`, `bench/live_cost.py`, `tests/cluster/`: each is there
    (`<placeholders>` and `*` match anything)."""
    named = REPO_PATH.findall(page.read_text())
    missing = [path for path in named
               if not list(ROOT.glob(re.sub(r"<[^>]+>", "*", path.rstrip("/"))))]
    assert missing == []


def test_every_option_is_documented_and_every_documented_option_exists() -> None:
    """Each of Settings' fields is a `--flag` on some page, and each flag of the options
    table in docs/operations.md is one of Settings' fields."""
    from sidecar.config import Settings

    fields = {name.replace("_", "-") for name in Settings.model_fields}
    text = " ".join(page.read_text() for page in PAGES)
    assert sorted(f for f in fields if f"`--{f}`" not in text and f"`--{f} " not in text) == []
    operations = (ROOT / "docs" / "operations.md").read_text()
    rows = [line.split("|")[1] for line in operations.splitlines()
            if line.startswith("| `--")]
    tabled = {flag for row in rows for flag in re.findall(r"`--([a-z-]+)", row)}
    assert len(tabled) > 20
    assert sorted(f for f in tabled - fields if f"no-{f}" not in tabled
                  and not (f.startswith("no-") and f[3:] in fields)) == []


def tool_commands(tool: str) -> list[tuple[str, list[str]]]:
    """Every `.venv/bin/TOOL ...` line of the pages' shell blocks with concrete arguments
    (lines with `...` in them are outlines, not commands)."""
    return [(name, words[1:]) for name, words in shell_lines(PAGES)
            if words and words[0].endswith(f"bin/{tool}") and "..." not in words]


def test_every_flow_sidecar_and_flow_pipeline_command_is_accepted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from api.main import load_settings
    from pipeline.cli import parse_args

    for name in [n for n in os.environ if n.startswith("FLOW_")]:
        monkeypatch.delenv(name)
    sidecar, pipeline = tool_commands("flow-sidecar"), tool_commands("flow-pipeline")
    assert len(sidecar) >= 2 and len(pipeline) >= 2
    for page, args in sidecar:
        try:
            load_settings(args)
        except SystemExit:
            pytest.fail(f"{page}: flow-sidecar {shlex.join(args)}")
    for page, args in pipeline:
        try:
            parse_args(args)
        except SystemExit:
            pytest.fail(f"{page}: flow-pipeline {shlex.join(args)}")


def test_every_helm_value_deploy_md_names_is_in_the_chart() -> None:
    """`--set a.b=...`, `a.b` in the text and the keys of the values file on the page are
    all values of helm/flow-sidecar/values.yaml (under `config:` any flag name goes)."""
    import yaml

    values = yaml.safe_load((ROOT / "helm/flow-sidecar/values.yaml").read_text())
    text = (ROOT / "docs" / "deploy.md").read_text()
    section = text[text.index("## Run on Kubernetes"):text.index("## Run on a Linux host")]
    named = set(re.findall(r"--set ([\w.]+)=", section))
    named |= {m for m in re.findall(r"`([A-Za-z]\w*(?:\.[A-Za-z]\w*)*)(?:=[^`]*)?`", section)
              if m.split(".")[0] in values}
    for body in re.findall(r"<<'VALUES'\n(.*?)\nVALUES", section, re.DOTALL):
        def keys(tree: object, prefix: str = "") -> set[str]:
            if not isinstance(tree, dict):
                return set()
            return {prefix + k for k in tree} | {
                path for k, v in tree.items() for path in keys(v, f"{prefix}{k}.")}
        named |= keys(yaml.safe_load(body))
    assert len(named) >= 10

    def exists(path: str) -> bool:
        node: object = values
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    missing = sorted(p for p in named
                     if not exists(p) and not p.startswith(("config.", "sidecar.podSelector.")))
    assert missing == []


def test_every_bench_is_on_the_benchmarks_page() -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    table = [line for line in page.splitlines() if line.startswith("| `bench/")]
    listed = {re.match(r"\| `(bench/[\w.]+)`", line).group(1) for line in table}  # type: ignore[union-attr]
    assert sorted(str(p.relative_to(ROOT)) for p in (ROOT / "bench").glob("*.py")) == \
        sorted(listed)
