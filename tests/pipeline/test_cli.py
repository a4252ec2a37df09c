"""The whole job in-process on generated history with damage added: counts of what could
not be used, the CSV tables, a self-contained report, and refusals."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pipeline import synthetic
from pipeline.cli import parse_args, run


def table(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_damaged_history_is_counted_not_fatal(spark: SparkSession, tmp_path: Path) -> None:
    history, out = tmp_path / "history", tmp_path / "out"
    written = list(synthetic.records(3, 900, seed=4))
    kinds = Counter(r["type"] for r in written)
    assert synthetic.generate(history, 3, 900, seed=4) == sum(kinds.values())
    (hour_file,) = history.glob("date=*/*.jsonl")
    good = json.loads(hour_file.read_text().splitlines()[0])
    missing = {k: v for k, v in good.items() if k != "messages"}
    with open(hour_file, "a", encoding="utf-8") as f:
        f.write(json.dumps(good)[:40] + "\n")              # truncated by a crash
        f.write("not json at all\n")                        # garbage
        f.write(json.dumps({**good, "messages": "lots"}) + "\n")  # wrong type
        f.write(json.dumps(missing) + "\n")                 # a required field missing
        f.write(json.dumps({**good, "bytes": None}) + "\n")  # a stream's: usable, no bytes
        f.write("\n")                                       # blank lines are no records
    assert run(spark, parse_args(["--history", str(history), "--out", str(out)])) == 0

    (quality,) = table(out / "input.csv")
    assert {k: int(v) for k, v in quality.items()} == {
        "records": sum(kinds.values()) + 5, "samples": kinds["sample"] + 1,
        "transitions": kinds["transition"], "corrupt": 3, "missingField": 1, "otherType": 0}
    episodes = table(out / "episodes.csv")
    assert episodes and all(e["start"].endswith("Z") for e in episodes)
    assert {r["dimension"] for r in table(out / "recommendations.csv")} == {"count", "size"}
    assert len(table(out / "summary.csv")) == 3  # 3 queues x 1 hour
    report = (out / "report.html").read_text()
    assert report.count('src="data:image/png;base64,') == 3
    assert "http" not in report.split("<body>")[1]  # nothing to fetch: one self-contained file
    assert "3 corrupt, 1 missing a field" in report
    # graded flow: every warning episode and stop of the history, each stop's producers
    graded, stops = table(out / "graded.csv"), table(out / "stops.csv")
    assert sum(int(r["warnings"]) for r in graded) == sum(
        1 for r in written if r["type"] == "warning" and r["event"] == "warning")
    assert len(stops) == sum(int(r["stops"]) for r in graded) == sum(
        1 for r in written if r.get("event") == "overfull") > 0
    assert all(s["topProducers"].startswith(s["topProducer"] + " [bulk] ") for s in stops)
    assert any(r["leadP50Seconds"] for r in graded) and any(r["falseWarnings"] != "0"
                                                           for r in graded)
    assert "Warnings, flapping and who filled the queues" in report


def test_since_until_and_unreadable_history(spark: SparkSession, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    history, out = tmp_path / "history", tmp_path / "out"
    synthetic.generate(history, 1, 600, seed=1)  # 00:00 to 00:10 UTC on START's day
    args = ["--history", str(history), "--out", str(out),
            "--since", "2026-11-23T00:02:00",  # naive: UTC
            "--until", "2026-11-22T23:03:00-01:00"]  # 00:03 UTC, on the 23rd
    assert run(spark, parse_args(args)) == 0
    expected = sum(1 for r in synthetic.records(1, 600, seed=1)
                   if synthetic.START + 120 <= r["ts"] < synthetic.START + 180)
    assert int(table(out / "input.csv")[0]["records"]) == expected > 0

    assert run(spark, parse_args(["--history", str(tmp_path / "nowhere"),
                                  "--out", str(out)])) == 2
    assert "cannot read" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--history", "h", "--out", "o", "--apply", "http://127.0.0.1:1", "--yes"])


def test_a_window_without_records_gives_empty_tables_and_a_report(
        spark: SparkSession, tmp_path: Path) -> None:
    history, out = tmp_path / "history", tmp_path / "out"
    synthetic.generate(history, 1, 60, seed=3)  # 00:00 to 00:01 UTC on START's day
    args = ["--history", str(history), "--out", str(out), "--since", "2026-11-24T00:00:00"]
    assert run(spark, parse_args(args)) == 0
    (quality,) = table(out / "input.csv")
    assert set(quality.values()) == {"0"}
    assert table(out / "episodes.csv") == [] and table(out / "recommendations.csv") == []
    assert "0 records" in (out / "report.html").read_text()
