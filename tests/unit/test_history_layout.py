"""Which history files a pipeline run reads (pipeline/layout.py, pure): compacted hours
once, old JSON Lines as they are, replicas' directories apart, whole hours of a window."""

from __future__ import annotations

from pipeline.layout import (
    HOUR,
    JSON_BYTES_PER_RECORD,
    PARQUET_BYTES_PER_RECORD,
    HistoryPart,
    closed_json_hours,
    estimated_records,
    part_of,
    to_read,
)

ROOT = "file:/data/history"
H0 = 1795392000  # 2026-11-23T00:00:00Z


def test_json_hours_parquet_hours_and_what_is_not_data() -> None:
    assert part_of(f"{ROOT}/date=2026-11-23/01.jsonl", ROOT) == HistoryPart(
        f"{ROOT}/date=2026-11-23/01.jsonl", "", H0 + HOUR, False)
    assert part_of(f"{ROOT}/date=2026-11-23/hour=02/part-0.zstd.parquet", ROOT) == \
        HistoryPart(f"{ROOT}/date=2026-11-23/hour=02", "", H0 + 2 * HOUR, True)
    assert part_of(f"{ROOT}/replica-b/date=2026-11-23/00.jsonl", ROOT).source == "replica-b"  # type: ignore[union-attr]
    assert part_of(f"{ROOT}/old.jsonl", ROOT) == HistoryPart(f"{ROOT}/old.jsonl", "", None,
                                                            False)
    for hidden in ("date=2026-11-23/hour=02/_SUCCESS", "date=2026-11-23/hour=02/.p.crc",
                   "_compacting-1/slot=0/part-0.parquet", "date=2026-11-23/notes.txt"):
        assert part_of(f"{ROOT}/{hidden}", ROOT) is None, hidden


def test_a_compacted_hour_is_read_from_parquet_only_and_windows_take_whole_hours() -> None:
    paths = [f"{ROOT}/date=2026-11-23/00.jsonl",  # left by a crash after compaction
             f"{ROOT}/date=2026-11-23/hour=00/part-0.parquet",
             f"{ROOT}/date=2026-11-23/hour=00/part-1.parquet",
             f"{ROOT}/date=2026-11-23/01.jsonl",
             f"{ROOT}/date=2026-11-23/02.jsonl"]
    assert [(p.hour, p.parquet) for p in to_read(paths, ROOT)] == [
        (H0, True), (H0 + HOUR, False), (H0 + 2 * HOUR, False)]
    assert [p.hour for p in to_read(paths, ROOT, since=H0 + HOUR + 1, until=H0 + 2 * HOUR)] \
        == [H0 + HOUR]
    closed = closed_json_hours(paths, ROOT, before=H0 + 2 * HOUR + 60)
    assert [p.hour for p in closed] == [H0 + HOUR]  # hour 2 is still open


def test_records_are_estimated_from_the_bytes_of_the_parts_a_run_reads() -> None:
    sizes = {f"{ROOT}/date=2026-11-23/00.jsonl": 3_000_000,  # compacted: not read
             f"{ROOT}/date=2026-11-23/hour=00/part-0.parquet": 2_000_000,
             f"{ROOT}/date=2026-11-23/hour=00/part-1.parquet": 3_000_000,
             f"{ROOT}/date=2026-11-23/hour=00/_SUCCESS": 0,
             f"{ROOT}/date=2026-11-23/01.jsonl": 600_000}
    parts = to_read(sizes, ROOT)
    assert estimated_records(sizes, ROOT, parts) == (
        5_000_000 // PARQUET_BYTES_PER_RECORD + 600_000 // JSON_BYTES_PER_RECORD)
    assert estimated_records(sizes, ROOT, to_read(sizes, ROOT, since=H0 + HOUR)) == 2_000
