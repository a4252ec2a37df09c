"""Name patterns that clients send (regular expressions, globs), compiled for RE2, a
linear-time engine, and matched against a list of names within a time budget (pure).

Python's `re` backtracks: `(.|.){24}#` against one name of 40 characters took 13 s.
RE2 matches in time linear in the name and the pattern's size, refuses what needs
backtracking (backreferences, look-around) and caps a pattern's program, so a pattern is
either refused up front or matched in bounded time (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import re2

Kind = Literal["regex", "glob"]
NameTest = Callable[[bytes], bool]  # a name, UTF-8 encoded, passes the pattern

MAX_PATTERN = 1000  # characters of a regular expression; a queue name is at most 255 bytes
MAX_GLOB = 255  # characters of a glob: `*a` 500 times took 3 s on one name, 127 times 0.5 ms
PROGRAM_MEMORY = 1 << 20  # RE2's memory for one pattern's program and DFA (default 8 MiB):
# nested counted repetitions past it are refused instead of matched at 26 ms a name
BUDGET = 0.5  # seconds of matching one request's names may take (docs/api.md)
CHECK_EVERY = 16  # names matched between two looks at the clock
LAST_CODE_POINT = 0x10FFFF


class PatternError(ValueError):
    """A pattern refused (not RE2 syntax, too long) or over its budget; `field` names the
    parameter for the 400."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _options(case_sensitive: bool) -> re2.Options:
    options = re2.Options()
    options.case_sensitive = case_sensitive
    options.max_mem = PROGRAM_MEMORY
    options.log_errors = False  # a client's bad pattern is its 400, not the operator's log
    return options


def _shown(pattern: str) -> str:
    return repr(pattern if len(pattern) <= 80 else pattern[:80] + "...")


def _compiled(field: str, pattern: str, source: str, case_sensitive: bool, what: str,
              max_length: int | None) -> re2._Regexp:
    if max_length is not None and len(pattern) > max_length:
        raise PatternError(field, f"{field}={_shown(pattern)} has {len(pattern)} characters; "
                                  f"a {what} may have at most {max_length}")
    try:
        return re2.compile(source, _options(case_sensitive))
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(
            exc.args[0], bytes) else str(exc)
        raise PatternError(field, f"{field}={_shown(pattern)} is not a {what} the sidecar "
                                  f"matches: {reason} (RE2 syntax, matched in linear time: "
                                  f"no backreferences, look-around or possessive "
                                  f"quantifiers)") from None
    except UnicodeEncodeError:
        raise PatternError(field, f"{field}={_shown(pattern)} is not valid Unicode") from None


def regex_test(pattern: str, field: str = "name") -> NameTest:
    """A case-insensitive regular expression searched in the name, as RabbitMQ's
    management API applies `use_regex` (`re:run(Name, Pattern, [caseless])`)."""
    search = _compiled(field, pattern, pattern, False, "regular expression", MAX_PATTERN).search
    return lambda name: search(name) is not None


def glob_test(glob: str, field: str = "name", max_length: int | None = MAX_GLOB) -> NameTest:
    """A glob on the whole name, case-sensitive, as `fnmatch.fnmatchcase` reads it."""
    fullmatch = _compiled(field, glob, glob_regex(glob), True, "glob", max_length).fullmatch
    return lambda name: fullmatch(name) is not None


def pattern_test(kind: Kind, pattern: str, field: str = "name") -> NameTest:
    """`regex_test` or `glob_test`, as `kind` says."""
    return regex_test(pattern, field) if kind == "regex" else glob_test(pattern, field)


def encoded(name: str) -> bytes:
    """A name as RE2 reads it; a lone surrogate (no broker sends one) cannot match `.`."""
    return name.encode("utf-8", "surrogatepass")


def matching(test: NameTest, names: Sequence[bytes], clock: Callable[[], float], *,
             field: str = "name", pattern: str = "", budget: float = BUDGET) -> list[int]:
    """The indexes of the names that pass `test`, or a PatternError once `budget` seconds
    are spent (looked at every CHECK_EVERY names: one name costs at most milliseconds)."""
    deadline = clock() + budget
    passed: list[int] = []
    for start in range(0, len(names), CHECK_EVERY):
        if clock() > deadline:
            raise over_budget(field, pattern, len(names), budget)
        passed.extend(i for i in range(start, min(start + CHECK_EVERY, len(names)))
                      if test(names[i]))
    return passed


def over_budget(field: str, pattern: str, names: int, budget: float) -> PatternError:
    """The refusal of a pattern that took longer than its budget."""
    return PatternError(field, f"{field}={_shown(pattern)} takes over {budget:g} s to match "
                               f"{names} queue names; a narrower pattern (anchored, without "
                               f"nested or long counted repetition) is answered")


def _char(c: str) -> str:
    return f"\\x{{{ord(c):x}}}"


def _set(body: str) -> str:
    """The RE2 class of a glob's bracket expression (what is between `[` and `]`), read as
    `fnmatch.translate` reads it: `!` first negates, `-` between two characters is a range
    (an empty range is dropped), every other character stands for itself."""
    negated = body.startswith("!")
    if "-" not in body:
        chunks = [body]
    else:  # fnmatch's chunks, the '!' kept in the first as it keeps it
        chunks = []
        i, k = 0, 2 if negated else 1
        while (k := body.find("-", k)) >= 0:
            chunks.append(body[i:k])
            i, k = k + 1, k + 3
        if body[i:]:
            chunks.append(body[i:])
        else:
            chunks[-1] += "-"
        for k in range(len(chunks) - 1, 0, -1):
            if chunks[k - 1][-1] > chunks[k][0]:  # an empty range: dropped
                chunks[k - 1] = chunks[k - 1][:-1] + chunks[k][1:]
                del chunks[k]
    if negated:
        chunks[0] = chunks[0][1:]
    text = "-".join("".join(_char(c) for c in chunk) for chunk in chunks)
    if not text:
        return "." if negated else f"[^\\x00-\\x{{{LAST_CODE_POINT:x}}}]"
    return f"[{'^' if negated else ''}{text}]"


def glob_regex(glob: str) -> str:
    """`glob` as an RE2 expression for a whole name: `*` any run, `?` any character,
    `[...]` a set, everything else itself (what `fnmatch.fnmatchcase` matches)."""
    parts: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        i += 1
        if c == "*":
            if not parts or parts[-1] != ".*":
                parts.append(".*")
        elif c == "?":
            parts.append(".")
        elif c == "[":
            j = i
            if j < n and glob[j] == "!":
                j += 1
            if j < n and glob[j] == "]":
                j += 1
            while j < n and glob[j] != "]":
                j += 1
            if j >= n:
                parts.append(_char("["))
            else:
                parts.append(_set(glob[i:j]))
                i = j + 1
        else:
            parts.append(_char(c))
    return "(?s)" + "".join(parts)
