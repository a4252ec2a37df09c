"""Where history lives on disk, and which files one run reads (pure: paths in, paths out).

The recorder appends JSON Lines, one file per UTC hour; `flow-pipeline compact` turns each
closed hour into Parquet beside it, in the same date partition, so the recorder's
retention deletes both and old JSON files stay readable as they are:

    <source>/date=2026-11-23/00.jsonl               the recorder's, the current hour's
    <source>/date=2026-11-23/hour=00/part-*.parquet  compacted, complete once it exists

An hour that has its Parquet directory is read from it and its JSON file (if a crash left
one behind) is skipped, so nothing is read twice. `<source>` is the path from the history
root to the `date=` directories: empty for one sidecar's history, one name per replica
when several replicas' directories are gathered under one root (each records the same
queues; the jobs keep them apart, see `pipeline/episodes.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

HOUR = 3600
# seconds after its end from which an hour is closed: compacted, and analysed by --since
CLOSED_AFTER = 300.0
_DATE = re.compile(r"date=(\d{4}-\d{2}-\d{2})")
_HOUR_DIR = re.compile(r"hour=(\d{2})")
_HOUR_FILE = re.compile(r"(\d{2})\.jsonl")
# bytes a record takes on disk, to size a run before anything is read: the recorder's JSON
# Lines (~310, docs/benchmarks.md#pipeline-throughput) and compacted Parquet (5 at a million records an hour,
# more on small hours: an estimate on the high side)
JSON_BYTES_PER_RECORD = 300
PARQUET_BYTES_PER_RECORD = 5


@dataclass(frozen=True)
class HistoryPart:
    """One thing to read: a JSON Lines file, or a compacted hour's Parquet directory.
    `hour` is the epoch second its UTC hour starts at, None when the path does not say."""

    path: str
    source: str
    hour: int | None
    parquet: bool


def _hour_start(day: str, hour: str) -> int | None:
    try:
        start = datetime.fromisoformat(day).replace(hour=int(hour), tzinfo=UTC)
    except ValueError:
        return None
    return int(start.timestamp())


def _hidden(name: str) -> bool:
    """Spark's own rule: _SUCCESS, .crc files and staging directories are not data."""
    return name.startswith(("_", "."))


def part_of(path: str, root: str) -> HistoryPart | None:
    """What the file at `path` (under `root`) is, or None if it is not history data."""
    relative = path[len(root):].strip("/") if path.startswith(root) else path
    names = relative.split("/") if relative else [path.rsplit("/", 1)[-1]]
    if any(_hidden(n) for n in names):
        return None
    dates = [i for i, n in enumerate(names) if _DATE.fullmatch(n)]
    if not dates:
        return HistoryPart(path, "", None, False) if names[-1].endswith(".jsonl") else None
    at = dates[-1]
    source, day = "/".join(names[:at]), _DATE.fullmatch(names[at]).group(1)  # type: ignore[union-attr]
    rest = names[at + 1:]
    if len(rest) == 2 and (hour_dir := _HOUR_DIR.fullmatch(rest[0])):
        if not rest[1].endswith(".parquet"):
            return None
        directory = path[:path.rindex("/")]
        return HistoryPart(directory, source, _hour_start(day, hour_dir.group(1)), True)
    if len(rest) == 1 and rest[0].endswith(".jsonl"):
        hour_file = _HOUR_FILE.fullmatch(rest[0])
        hour = _hour_start(day, hour_file.group(1)) if hour_file else None
        return HistoryPart(path, source, hour, False)
    return None


def in_window(hour: int | None, since: float | None, until: float | None) -> bool:
    """Whether an hour [hour, hour + 1 h) can hold records with since <= ts < until (an
    unknown hour always can)."""
    if hour is None:
        return True
    return (since is None or hour + HOUR > since) and (until is None or hour < until)


def to_read(paths: Iterable[str], root: str, since: float | None = None,
            until: float | None = None) -> list[HistoryPart]:
    """The parts to read for the window: each compacted hour once (its Parquet directory)
    and the JSON files of every other hour, sorted by source, hour and path."""
    parts = {p for p in (part_of(path, root) for path in paths) if p is not None}
    compacted = {(p.source, p.hour) for p in parts if p.parquet}
    chosen = [p for p in parts if in_window(p.hour, since, until)
              and (p.parquet or (p.source, p.hour) not in compacted)]
    return sorted(chosen, key=lambda p: (p.source, p.hour or 0, p.path))


def closed_json_hours(paths: Iterable[str], root: str, before: float) -> list[HistoryPart]:
    """JSON hour files `compact` may turn into Parquet: hours that ended by `before` (the
    recorder writes no more to them) and are not compacted yet."""
    return [p for p in to_read(paths, root)
            if not p.parquet and p.hour is not None and p.hour + HOUR <= before]


def hour_directory(root: str, part: HistoryPart) -> str:
    """Where the compacted Parquet of a JSON hour file goes."""
    assert part.hour is not None
    start = datetime.fromtimestamp(part.hour, UTC)
    source = f"{part.source}/" if part.source else ""
    return f"{root.rstrip('/')}/{source}date={start:%Y-%m-%d}/hour={start:%H}"


def estimated_records(sizes: Mapping[str, int], root: str, parts: Iterable[HistoryPart]
                      ) -> int:
    """About how many records `parts` hold, from the lengths of the files under `root`
    (`sizes`: path -> bytes, as listed)."""
    chosen, total = set(parts), 0
    for path, size in sizes.items():
        part = part_of(path, root)
        if part in chosen:
            total += size // (PARQUET_BYTES_PER_RECORD if part.parquet
                              else JSON_BYTES_PER_RECORD)
    return total
