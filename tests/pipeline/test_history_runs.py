"""Compacted history and incremental runs give the tables a full run over the JSON Lines
gives, to the last digit; several replicas' histories count each episode once."""

from __future__ import annotations

import csv
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipeline import synthetic
from pipeline.cli import parse_args, run
from pipeline.compact import compact
from pipeline.layout import CLOSED_AFTER, HOUR
from tests.pipeline.test_cli import table

TABLES = ("input.csv", "episodes.csv", "summary.csv", "recommendations.csv")
GRADED = ("graded.csv", "stops.csv")  # a run's own hours only: not merged across runs
HOURS = 3


def tables(out: Path, names: tuple[str, ...] = TABLES) -> dict[str, str]:
    return {name: (out / name).read_text() for name in names}


def analyse(spark: SparkSession, history: Path, out: Path, *options: str) -> dict[str, str]:
    assert run(spark, parse_args(["--history", str(history), "--out", str(out),
                                  *options])) == 0
    return tables(out)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three queues over three hours and a half, as the recorder writes them (seed 13: an
    episode goes on across 01:00 and one across 03:00, where incremental runs meet)."""
    directory = tmp_path_factory.mktemp("history") / "history"
    synthetic.generate(directory, 3, HOURS * HOUR + 1800, seed=13)
    return directory


@pytest.fixture(scope="module")
def full(spark: SparkSession, history: Path, tmp_path_factory: pytest.TempPathFactory
         ) -> dict[str, str]:
    out = tmp_path_factory.mktemp("full")
    analyse(spark, history, out)
    return tables(out, TABLES + GRADED)


def merged_tables(full: dict[str, str]) -> dict[str, str]:
    return {name: full[name] for name in TABLES}


@pytest.fixture()
def compacted(spark: SparkSession, history: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the history with its first three hours compacted, the last one open."""
    copy = tmp_path / "compacted"
    shutil.copytree(history, copy)
    done = compact(spark, str(copy), now=synthetic.START + HOURS * HOUR + CLOSED_AFTER)
    assert done.hours == HOURS and done.records > 0
    yield copy


def test_compacted_hours_are_parquet_and_give_the_same_tables(
        spark: SparkSession, history: Path, full: dict[str, str], compacted: Path,
        tmp_path: Path) -> None:
    day = compacted / "date=2026-11-23"
    assert sorted(p.name for p in day.iterdir()) == ["03.jsonl", "hour=00", "hour=01",
                                                     "hour=02"]
    assert list((day / "hour=00").glob("*.parquet"))
    # a crash between renaming an hour into place and deleting its JSON file: read once
    shutil.copy(history / "date=2026-11-23" / "00.jsonl", day / "00.jsonl")
    assert analyse(spark, compacted, tmp_path / "out") == merged_tables(full)
    # compaction keeps the warnings, the stops' producers and the settings changes
    assert tables(tmp_path / "out", GRADED) == {name: full[name] for name in GRADED}
    # every other queue has pacing and classes from 01:45 (the synthetic history's middle):
    # flapping before (hour 00) and after (hours 02 and 03; 01 counts for neither)
    enabled = [r for r in csv.DictReader(full["graded.csv"].splitlines()) if r["enabledAt"]]
    assert [(r["queue"], r["enabledAt"]) for r in enabled] == [
        (f"synthetic-0000{i}", "2026-11-23T01:45:00.000Z") for i in (0, 2)]
    assert all(r["stopsPerHourBefore"] and r["stopsPerHourAfter"] for r in enabled)
    parquet = sum(p.stat().st_size for p in day.glob("hour=*/*.parquet"))
    json = sum((history / "date=2026-11-23" / f"0{h}.jsonl").stat().st_size
               for h in range(HOURS))
    assert parquet * 5 < json  # zstd over sorted columns: several times smaller


def test_incremental_runs_merge_into_what_a_full_run_gives(
        spark: SparkSession, history: Path, full: dict[str, str], compacted: Path,
        tmp_path: Path) -> None:
    out = tmp_path / "out"
    # --until is cut to the hour: the first run takes hour 0, the second hours 1 and 2
    first = analyse(spark, compacted, out, "--since", "--until", "2026-11-23T01:30:00")
    assert first != merged_tables(full)
    # what is analysed is not read again: the first hour can go
    shutil.rmtree(compacted / "date=2026-11-23" / "hour=00")
    analyse(spark, compacted, out, "--since", "--until", "2026-11-23T03:00:00")
    assert analyse(spark, compacted, out, "--since") == merged_tables(full)
    # nothing new: unchanged
    assert analyse(spark, compacted, out, "--since") == merged_tables(full)
    spans = [e for e in table(out / "episodes.csv")
             if e["start"] < "2026-11-23T01:00" < (e["end"] or "9")
             or e["start"] < "2026-11-23T03:00" < (e["end"] or "9")]
    assert spans, "no episode crosses a run boundary: the test would prove little"


def test_each_replicas_episode_counts_once(spark: SparkSession, tmp_path: Path) -> None:
    """Two replicas record the same queues, polling 0.4 s apart (each records every state
    change, as live depth makes it do). Their merged history has the episodes of either
    one alone, no more: each episode is seen by both, a little apart, and counts once."""
    merged = tmp_path / "merged"
    synthetic.generate(merged / "replica-a", 3, 1800, seed=8)
    synthetic.generate(merged / "replica-b", 3, 1800, seed=8, start=synthetic.START + 0.4)
    alone = analyse(spark, merged / "replica-a", tmp_path / "alone")
    both = analyse(spark, merged, tmp_path / "both")
    assert len(table(tmp_path / "alone" / "episodes.csv")) > 3
    assert [(e["queue"], e["peakMessages"], e["overshootMessages"])
            for e in table(tmp_path / "both" / "episodes.csv")] == [
        (e["queue"], e["peakMessages"], e["overshootMessages"])
        for e in table(tmp_path / "alone" / "episodes.csv")]
    assert [(s["queue"], s["hour"], s["flowStoppedCount"])
            for s in table(tmp_path / "both" / "summary.csv")] == [
        (s["queue"], s["hour"], s["flowStoppedCount"])
        for s in table(tmp_path / "alone" / "summary.csv")]
    assert both["recommendations.csv"] == alone["recommendations.csv"]
