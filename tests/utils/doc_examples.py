"""The examples of the documentation pages as the doc test runs them: every fenced block
in a language a reader would run, with its page, line and the marker before it.

A block runs unless an HTML comment on the line before its fence says otherwise:

    <!-- not run: needs a Kubernetes cluster -->    skipped; the reason is required
    <!-- output -->                                 what the block above printed
    <!-- background: until some text -->           a terminal of its own: started, and the
                                                    next block runs once its output shows
                                                    the text (killed at the end of the page)
    <!-- file: examples/node/producer.js -->        that file's content, checked verbatim

JSON blocks are answers, never commands: each must carry `output` or `not run`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUN_LANGUAGES = frozenset({"sh", "bash", "console", "python", "json", "js"})
KINDS = ("not run", "output", "background", "file")
FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!--\s*(not run|output|background|file)\s*(?::\s*(.*?))?\s*-->\s*$")


@dataclass(frozen=True)
class Example:
    """One fenced block: `kind` is "run" or a marker's kind, `note` the marker's text."""

    page: Path
    line: int  # the opening fence's, from 1
    language: str
    body: str
    kind: str = "run"
    note: str = ""

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"

    def commands(self) -> str:
        """The shell text to run: a console block's `$ ` lines, any other block whole."""
        if self.language != "console":
            return self.body
        return "\n".join(line[2:] for line in self.body.splitlines() if line.startswith("$ "))


class MarkerError(ValueError):
    """A marker the doc test cannot honour (no reason, a JSON block with none)."""


def examples(page: Path, text: str | None = None) -> list[Example]:
    """The blocks of `text` (default: the page's) in RUN_LANGUAGES, in order; `page` names
    them. Raises MarkerError, naming page and line, for a marker without its text or a
    JSON block without a marker."""
    lines = (page.read_text() if text is None else text).splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        start = i
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise MarkerError(f"{page.name}:{start + 1}: a code fence is never closed")
        i = end + 1
        language = fence.group(1)
        if language not in RUN_LANGUAGES:
            continue
        kind, note = "run", ""
        marker = MARKER.match(lines[start - 1]) if start else None
        if marker:
            kind, note = marker.group(1), marker.group(2) or ""
            if kind in ("not run", "file") and not note:
                raise MarkerError(f"{page.name}:{start + 1}: <!-- {kind}: ... --> needs its text")
        if language == "json" and kind not in ("output", "not run"):
            raise MarkerError(f"{page.name}:{start + 1}: a JSON block is an answer: mark it "
                              "<!-- output --> or <!-- not run: why -->")
        found.append(Example(page, start + 1, language, "\n".join(lines[start + 1:end]),
                             kind, note))
    return found


def section(text: str, heading: str) -> str:
    """`text` with everything outside the `## heading` section blanked, line numbers kept."""
    lines = text.splitlines()
    first = lines.index(heading)
    last = next((j for j in range(first + 1, len(lines)) if lines[j].startswith("## ")),
                len(lines))
    return "\n".join(line if first <= n < last else "" for n, line in enumerate(lines))


def json_keys(text: str) -> set[str]:
    """The keys an answer shown on a page names (`"key":`), shown elided (`...`) or not."""
    return set(re.findall(r'"([^"\\]+)"\s*:', text))
