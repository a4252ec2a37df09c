"""The driver JVM's options of a run (pipeline/launch.py), chosen from a local listing
before the JVM starts: the estimate, the heap, C1 for small runs, the class archive's
life in the cache (used, written once, given up on), and nothing under spark-submit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.launch import (
    BASE_HEAP,
    GIB,
    ClassArchive,
    estimated,
    for_run,
    heap_bytes,
    local_path,
)
from pipeline.layout import JSON_BYTES_PER_RECORD, PARQUET_BYTES_PER_RECORD

C1 = "-XX:TieredStopAtLevel=1"


def history(root: Path, json_bytes: int, parquet_bytes: int) -> Path:
    """A history directory with one JSON hour and one compacted hour of these sizes
    (sparse files: only their lengths are read)."""
    day = root / "history" / "date=2026-11-23"
    (day / "hour=01").mkdir(parents=True)
    with open(day / "00.jsonl", "wb") as f:
        f.truncate(json_bytes)
    with open(day / "hour=01" / "part-0.zstd.parquet", "wb") as f:
        f.truncate(parquet_bytes)
    (day / "hour=01" / "_SUCCESS").touch()
    return root / "history"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    return tmp_path / "cache" / "flow-pipeline"


def test_only_local_histories_are_listed(tmp_path: Path) -> None:
    assert local_path("file:/data/history") == Path("/data/history")
    assert local_path("/data/history") == Path("/data/history")
    assert local_path("data/history") == Path("data/history")
    assert local_path("hdfs://namenode/history") is None
    assert local_path("s3a://bucket/history") is None
    assert estimated("s3a://bucket/history") is None
    assert estimated(str(tmp_path / "missing")) is None


def test_the_estimate_counts_what_a_run_reads(tmp_path: Path) -> None:
    path = history(tmp_path, 300 * JSON_BYTES_PER_RECORD, 1000 * PARQUET_BYTES_PER_RECORD)
    assert estimated(str(path)) == 1300
    assert estimated(path.as_uri()) == 1300
    assert estimated(str(path), since=1795392000 + 3600) == 1000  # the JSON hour is before
    assert estimated(str(path / "date=2026-11-23" / "00.jsonl")) == 300


def test_the_heap_grows_with_the_records_within_a_share_of_the_ram() -> None:
    assert heap_bytes(1_000, 64 * GIB) == BASE_HEAP
    assert heap_bytes(2_000_000, 64 * GIB) == BASE_HEAP
    big = heap_bytes(10_000_000, 64 * GIB)
    assert big > BASE_HEAP and big % GIB == 0
    assert heap_bytes(10**9, 16 * GIB) == 8 * GIB
    assert heap_bytes(10**9, 2 * GIB) == BASE_HEAP  # never below the default


def test_the_archive_is_written_once_then_mapped(tmp_path: Path) -> None:
    old = tmp_path / "spark-0ld.jsa"
    old.write_bytes(b"an archive of an earlier install")
    writer = ClassArchive(tmp_path, "k1", pid=7)
    (dump,) = [o for o in writer.options() if o.startswith("-XX:ArchiveClassesAtExit=")]
    assert dump.endswith("spark-k1.7.partial") and writer.writing()
    Path(dump.split("=", 1)[1]).write_bytes(b"classes")  # the JVM writes it as it exits
    writer.written(exited_cleanly=True)
    assert writer.path.read_bytes() == b"classes" and not old.exists()
    assert not list(tmp_path.glob("*.partial"))
    reader = ClassArchive(tmp_path, "k1", pid=8)
    assert f"-XX:SharedArchiveFile={writer.path}" in reader.options()
    assert not reader.writing()


def test_an_archive_that_could_not_be_written_is_not_tried_again(tmp_path: Path) -> None:
    first = ClassArchive(tmp_path, "k2", pid=7)
    assert first.options()
    first.partial.write_bytes(b"half")  # the JVM failed (exit status 1) as it wrote
    first.written(exited_cleanly=False)
    assert not first.path.exists() and not first.partial.exists()
    assert ClassArchive(tmp_path, "k2", pid=8).options() == []
    assert ClassArchive(tmp_path, "k3", pid=8).options()  # another install tries


def test_a_small_local_run_gets_c1_an_archive_and_the_base_heap(tmp_path: Path,
                                                                cache: Path) -> None:
    launch = for_run(str(history(tmp_path, 300_000, 0)), "local[2]")
    assert C1 in launch.java_options and launch.driver_memory == "2g"
    assert launch.archive is not None and launch.archive.directory == cache
    assert any(o.startswith("-XX:ArchiveClassesAtExit=") for o in launch.java_options)


def test_a_large_run_keeps_c2_and_a_cluster_run_its_heap(tmp_path: Path,
                                                         cache: Path) -> None:
    path = str(history(tmp_path, 0, 10_000_000 * PARQUET_BYTES_PER_RECORD))
    local = for_run(path, None)
    assert C1 not in local.java_options and local.driver_memory != "2g"
    assert for_run(path, "spark://127.0.0.1:7077").driver_memory is None
    assert for_run("hdfs://namenode/history", "local[2]").driver_memory is None


def test_nothing_is_chosen_under_spark_submit(tmp_path: Path, cache: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "4040")
    launch = for_run(str(history(tmp_path, 300_000, 0)), "local[2]")
    assert launch.java_options == [] and launch.driver_memory is None
    assert not cache.exists()


def test_an_unwritable_cache_gives_no_archive(tmp_path: Path, cache: Path) -> None:
    cache.parent.mkdir()
    cache.write_text("a file where the directory should be")
    launch = for_run(str(history(tmp_path, 300_000, 0)), "local[2]")
    assert launch.archive is None and launch.java_options == ["-XX:TieredStopAtLevel=1"]
    assert os.path.isfile(cache)
