"""RabbitMQ's Prometheus endpoint (`rabbitmq_prometheus`, port 15692) read as a stream.

On RabbitMQ 4.x the management statistics are a deprecated feature
(`management_metrics_collection`); with it denied `/api/queues` has no depth and
`/api/nodes` no alarms, while the Prometheus plugin still serves both:

- `/metrics/detailed?family=queue_coarse_metrics&family=queue_metrics`: per queue
  `rabbitmq_detailed_queue_messages` (ready + unacknowledged, Qpid's depth),
  `..._messages_unacked`, and `..._messages_bytes` (ready + unacknowledged bodies, as
  `message_bytes` of the management API). Only the queues whose process runs on the node
  asked: a cluster is read node by node.
- `/metrics`: `rabbitmq_alarms_memory_used_watermark` and
  `rabbitmq_alarms_free_disk_space_watermark` (1 while raised) of that node, whose name is
  the `rabbitmq_node` label of `rabbitmq_identity_info`.

A 10,000-queue answer is about 16 MB of text (3 MB with `queue_coarse_metrics` alone):
`FigureLines.read` takes it in blocks of whole lines as they arrive (`whole_lines` cuts the
HTTP body so) and picks out the lines of the three samples a queue needs with one compiled
pattern (a literal first, which the regex engine finds fast), whole, as strings. Only the
lines that differ from the answer before are parsed: a queue whose figures did not change
keeps its `QueueFigures` object (the poll's later stages skip it by identity), and an
answer where nothing changed costs a fraction of a full parse
(docs/benchmarks.md#reads-and-memory-at-10000-queues). `node_alarms` reads a small answer
line by line. Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sidecar.flow.broker_alarms import NodeStatus
from sidecar.model import QueueKey

QUEUE_FAMILIES = ("queue_coarse_metrics", "queue_metrics")
QUEUE_PREFIX = "rabbitmq_detailed_queue_"
QUEUE_FIELDS = {"messages": "messages", "messages_unacked": "unacked",
                "messages_bytes": "bytes"}
ALARMS = {"rabbitmq_alarms_memory_used_watermark": "memory",
          "rabbitmq_alarms_free_disk_space_watermark": "disk"}
IDENTITY = "rabbitmq_identity_info"
# the samples a queue needs, labels in the order rabbitmq_prometheus writes them; other
# lines of the families (17 more per queue) never match, so they cost no Python object
_LABEL_VALUE = r'((?:[^"\\\n]|\\.)*)'
QUEUE_LINE = re.compile(
    rf'^{QUEUE_PREFIX}(messages|messages_unacked|messages_bytes)'
    rf'\{{vhost="{_LABEL_VALUE}",queue="{_LABEL_VALUE}"\}} ([^ \n]+)', re.MULTILINE)
# the same samples as whole lines, each with the newline before it (a block is read with
# one put in front): the literal start lets the regex engine skip ahead to each one
SAMPLE_LINE = re.compile(
    rf'\n{QUEUE_PREFIX}messages(?:_unacked|_bytes)?\{{[^\n]*')
_ESCAPE = re.compile(r"\\(.)")
IDENTITY_NODE = re.compile(rf'^{IDENTITY}\{{[^\n]*?rabbitmq_node="{_LABEL_VALUE}"', re.MULTILINE)


@dataclass
class QueueFigures:
    """One queue's depth as the Prometheus endpoint gives it; None where it did not."""

    messages: int | None = None
    unacked: int | None = None
    bytes: int | None = None


def _labels(text: str) -> dict[str, str] | None:
    """`vhost="/",queue="a \\"b\\""` as a dict; None when malformed. Values are unescaped
    as the exposition format escapes them (backslash, double quote, newline)."""
    labels: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        eq = text.find("=", i)
        if eq < 0 or eq + 1 >= n or text[eq + 1] != '"':
            return None
        name = text[i:eq].strip().lstrip(",").strip()
        value: list[str] = []
        j = eq + 2
        while j < n and text[j] != '"':
            if text[j] == "\\" and j + 1 < n:
                j += 1
                value.append("\n" if text[j] == "n" else text[j])
            else:
                value.append(text[j])
            j += 1
        if j >= n:
            return None
        labels[name] = "".join(value)
        i = j + 1
        while i < n and text[i] in ", ":
            i += 1
    return labels


def _sample(line: str) -> tuple[str, dict[str, str], str] | None:
    """(metric name, labels, value text) of a sample line; None for comments, blank or
    malformed lines."""
    if not line or line[0] == "#":
        return None
    brace = line.find("{")
    if brace < 0:
        name, _, rest = line.partition(" ")
        return (name, {}, rest.split(" ")[0]) if rest else None
    close = line.rfind("}")
    if close < brace:
        return None
    labels = _labels(line[brace + 1:close])
    if labels is None:
        return None
    return line[:brace], labels, line[close + 1:].strip().split(" ")[0]


def _count(value: str) -> int | None:
    """A gauge's value as a whole count; None for NaN, infinities or garbage."""
    try:
        number = float(value)
    except ValueError:
        return None
    return int(number) if math.isfinite(number) and number >= 0 else None


def _unescaped(value: str) -> str:
    """A label value as the exposition format escapes it (backslash, quote, newline)."""
    if "\\" not in value:
        return value
    return _ESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def whole_lines(blocks: Iterable[bytes]) -> Iterator[str]:
    """Byte blocks of an answer as text blocks that end where a line ends (a line, or a
    UTF-8 character, cut between two blocks is joined first)."""
    rest = b""
    for block in blocks:
        cut = block.rfind(b"\n")
        if cut < 0:
            rest += block
            continue
        yield (rest + block[:cut]).decode("utf-8", errors="replace")
        rest = block[cut + 1:]
    if rest:
        yield rest.decode("utf-8", errors="replace")


Sample = tuple[QueueKey, str, int | None]  # (queue, QueueFigures field, value)


class FigureLines:
    """The per-queue figures of one endpoint's successive answers (of the same families),
    parsed only where a line differs from the answer before (see the module). The
    dicts and figures it returns are shared with later reads: never change them."""

    def __init__(self) -> None:
        self._parsed: dict[str, Sample | None] = {}  # the last answer's sample lines
        self._lines: dict[QueueKey, int] = {}  # how many of them each queue has
        self._figures: dict[QueueKey, QueueFigures] = {}

    def read(self, blocks: Iterable[str], nodes: set[str] | None = None
             ) -> dict[QueueKey, QueueFigures]:
        """Per-queue figures from a `/metrics/detailed` answer with the queue families,
        given as blocks of whole lines (single lines will do); the node it names
        (`rabbitmq_identity_info`) is added to `nodes`."""
        parsed = self._parsed
        lines: set[str] = set()
        fresh: set[str] = set()  # lines the answer before did not have
        for block in blocks:
            if nodes is not None and IDENTITY in block:
                nodes.update(_unescaped(node) for node in IDENTITY_NODE.findall(block))
            found = set(SAMPLE_LINE.findall("\n" + block))
            lines |= found
            fresh |= found.difference(parsed)  # over `found`: `- parsed.keys()` walks all
                # set operations over every line are single calls that hold the GIL, and `/flow`
        # waits for it: a block's at a time above, and
        # the lines gone looked for only when some are (the count says so), line by line
        gone = []
        if len(parsed) + len(fresh) != len(lines):
            gone = [parsed.pop(line) for line in [old for old in parsed if old not in lines]]
        new = []
        for line in fresh:
            sample = parsed[line] = _parse(line)
            new.append(sample)
        if any(gone) or any(new):
            self._figures = self._changed(gone, new)
        return self._figures

    def _changed(self, gone: list[Sample | None], new: list[Sample | None]
                 ) -> dict[QueueKey, QueueFigures]:
        """The figures with the samples of lines gone cleared and of new lines set; a
        queue left without a line is left out. Changed queues get new objects."""
        figures, lines = dict(self._figures), self._lines
        touched: dict[QueueKey, QueueFigures] = {}
        for sample, step in [(s, -1) for s in gone] + [(s, 1) for s in new]:
            if sample is None:
                continue
            key, field, value = sample
            entry = touched.get(key)
            if entry is None:
                old = figures.get(key)
                entry = touched[key] = (QueueFigures() if old is None else
                                        QueueFigures(old.messages, old.unacked, old.bytes))
            setattr(entry, field, value if step > 0 else None)
            lines[key] = lines.get(key, 0) + step
        for key, entry in touched.items():
            if lines[key] > 0:
                figures[key] = entry
            else:
                figures.pop(key, None)
                del lines[key]
        return figures


def _parse(line: str) -> Sample | None:
    """A sample line (with its newline in front) as (queue, field, value); None when its
    labels are not `vhost`, `queue` in that order."""
    match = QUEUE_LINE.match(line, 1)
    if match is None:
        return None
    metric, vhost, queue, value = match.groups()
    return (_unescaped(vhost), _unescaped(queue)), QUEUE_FIELDS[metric], _count(value)


def node_alarms(lines: Iterable[str]) -> tuple[str, NodeStatus] | None:
    """(node name, its alarm flags) from a node's `/metrics` answer; None when it has no
    identity line (not RabbitMQ's plugin, or cut short). A flag it lacks is None."""
    node: str | None = None
    flags: dict[str, bool | None] = {"memory": None, "disk": None}
    for line in lines:
        if not line.startswith(("rabbitmq_alarms_", IDENTITY)):
            continue
        parsed = _sample(line)
        if parsed is None:
            continue
        name, labels, value = parsed
        if name == IDENTITY:
            node = labels.get("rabbitmq_node", node)
        elif name in ALARMS:
            count = _count(value)
            flags[ALARMS[name]] = None if count is None else count > 0
    return None if node is None else (node, NodeStatus(flags["memory"], flags["disk"]))
