"""Callers' name patterns in RE2 (sidecar.name_patterns): ordinary regular expressions match
as Python's `re` matched them before, globs as `fnmatch` did, and what needs backtracking,
an oversized pattern or a spent budget is refused naming the field."""

from __future__ import annotations

import glob
import re
from fnmatch import fnmatchcase
from itertools import count

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.name_patterns import (
    CHECK_EVERY,
    MAX_GLOB,
    MAX_PATTERN,
    PatternError,
    encoded,
    glob_test,
    matching,
    regex_test,
)


@pytest.mark.parametrize(("pattern", "queue", "passes"), [
    ("^ord.*eu$", "Orders.EU", True),          # case-insensitive, searched, as RabbitMQ
    ("rs\\.e", "orders.eu", True),
    ("^eu", "orders.eu", False),
    ("(eu|us)$", "orders.us", True),
    ("orders\\.[a-z]{2}-\\d+", "x.ORDERS.eu-12", True),
    ("^[^.]+$", "orders.eu", False),
    ("заказ", "ЗАКАЗЫ", True),                 # Unicode letters fold case too
    ("a.c", "aéc", True),                      # `.` is one character, not one byte
    ("(?i)x", "X", True),
    ("(?-i:X)", "x", False),                   # a flag of its own wins
    ("\\bq\\b", "a q b", True),
    ("(.|.){24}#", "a" * 39, False),           # the 13 s pattern: microseconds
])
def test_regular_expressions_as_rabbitmq_applies_them(pattern: str, queue: str,
                                                      passes: bool) -> None:
    assert regex_test(pattern)(encoded(queue)) is passes


@pytest.mark.parametrize(("pattern", "queue", "passes"), [
    ("orders.*", "orders.eu", True),           # a glob on the whole name
    ("orders.*", "xorders.eu", False),
    ("Orders.*", "orders.eu", False),          # globs stay case-sensitive
    ("q?x", "q.x", True),
    ("q[?]x", "q?x", True),                    # glob.escape'd names match themselves
    ("[!a]*", "abc", False),
    ("[z-a]", "m", False),                     # an empty range matches nothing
    ("[!]x", "[!]x", True),                    # unclosed: literal
    ("a\\b", "a\\b", True),                    # a backslash is itself
    ("*", "line\nbreak", True),
])
def test_globs_as_fnmatch_reads_them(pattern: str, queue: str, passes: bool) -> None:
    assert glob_test(pattern)(encoded(queue)) is passes
    assert fnmatchcase(queue, pattern) is passes


@pytest.mark.parametrize(("pattern", "reason"), [
    ("(", "missing )"),
    ("(a+)\\1", "invalid escape sequence: \\1"),      # backreference
    ("(?=a)b", "invalid perl operator: (?="),         # look-ahead
    ("(?<!a)b", "invalid perl operator: (?<"),        # look-behind
    ("a*+", "bad repetition operator: *+"),           # possessive
    ("(?>a)", "invalid perl operator: (?>"),          # atomic group
    ("(a{1000}){1000}", "invalid repetition size"),   # counted repetition past RE2's cap
    ("\\pL{100}\\pN", "pattern too large"),           # a program past PROGRAM_MEMORY
])
def test_what_needs_backtracking_or_too_much_memory_is_refused_naming_the_field(
        pattern: str, reason: str) -> None:
    with pytest.raises(PatternError) as refused:
        regex_test(pattern)
    assert refused.value.field == "name"
    assert refused.value.message.startswith(f"name={pattern!r} is not a regular expression")
    assert reason in refused.value.message


def test_a_pattern_longer_than_the_cap_is_refused_before_it_is_compiled() -> None:
    for test, longest in ((regex_test, MAX_PATTERN), (glob_test, MAX_GLOB)):
        test("a" * longest, "queue")
        with pytest.raises(PatternError, match=f"at most {longest}") as refused:
            test("a" * (longest + 1), "queue")
        assert refused.value.field == "queue" and refused.value.message.startswith("queue=")


def test_matching_stops_when_its_budget_is_spent() -> None:
    ticks = count()
    names = [encoded(f"q{i}") for i in range(10 * CHECK_EVERY)]

    def clock() -> float:  # each look at the clock: 0.1 s later
        return next(ticks) * 0.1

    with pytest.raises(PatternError, match="takes over 0.35 s to match 160 queue names"):
        matching(regex_test("q"), names, clock, pattern="q", budget=0.35)
    assert matching(regex_test("q1"), names, lambda: 0.0, budget=0.35) == [
        i for i in range(len(names)) if b"q1" in names[i]]


# Ordinary patterns, as an operator types them: literals, `.`, classes, groups, alternation,
# quantifiers (greedy or lazy), anchors at the ends.
LITERALS = "abcXYZ019"
ATOM = st.one_of(st.sampled_from(list(LITERALS) + [".", "\\.", "-", "_"]),
                 st.sampled_from(["[a-c]", "[^b]", "[0-9]", "[A-Za-z_]", "[.-]"]))
PERL = st.sampled_from(["\\d", "\\w", "\\s", "\\D", "\\W", "\\b"])
QUANTIFIER = st.sampled_from(["", "", "*", "+", "?", "{2}", "{1,3}", "{2,}", "*?", "+?"])


def ordinary(atoms: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.builds(lambda a, b: a + b, inner, inner),
            st.builds(lambda a, b: f"{a}|{b}", inner, inner),
            st.builds(lambda a, q, c: f"({a}){q}" if c else f"(?:{a}){q}",
                      inner, QUANTIFIER, st.booleans()))
    quantified = st.builds(lambda a, q: a if a == "\\b" else a + q, atoms, QUANTIFIER)
    body = st.recursive(quantified, grow, max_leaves=6)
    return st.builds(lambda start, b, end: start + b + end, st.sampled_from(["", "^"]), body,
                     st.sampled_from(["", "$"]))


@settings(max_examples=300, deadline=None)
@given(ordinary(st.one_of(ATOM, PERL)), st.text(LITERALS + "abcxyz.-_ ", max_size=12))
def test_ordinary_patterns_on_ascii_names_match_as_before(pattern: str, queue: str) -> None:
    assert regex_test(pattern)(encoded(queue)) is (
        re.search(pattern, queue, re.IGNORECASE) is not None)


@settings(max_examples=200, deadline=None)
@given(ordinary(ATOM), st.text(LITERALS + "abcxyzéÉßøØ.-_ 注", max_size=12))
def test_ordinary_patterns_on_unicode_names_match_as_before(pattern: str, queue: str) -> None:
    # `\d`, `\w`, `\s`, `\b` left out: RE2 reads them as ASCII, as RabbitMQ's PCRE does
    # (docs/api.md), where Python's `re` read them as Unicode
    assert regex_test(pattern)(encoded(queue)) is (
        re.search(pattern, queue, re.IGNORECASE) is not None)


@settings(max_examples=800, deadline=None)
@given(st.text("ab!-[]^\\*?z. \n\x00é", max_size=8), st.text("ab!-[]^\\z. \n\x00é", max_size=6))
def test_globs_match_as_fnmatch_matched_them(pattern: str, queue: str) -> None:
    assert glob_test(pattern)(encoded(queue)) is fnmatchcase(queue, pattern)


@given(st.text(max_size=20))
def test_an_escaped_name_matches_itself(queue: str) -> None:
    assert glob_test(glob.escape(queue))(encoded(queue))
