"""`flow-pipeline`: read flow history, write episodes, summaries, recommendations, a report.

All I/O is here; every step in between is a `DataFrame -> DataFrame` transform from the
other modules, so the same code runs in the tests on inline rows, on `local[*]` and under
`spark-submit` on a cluster:

    flow-pipeline --history data/history --out report/
    spark-submit --master spark://host:7077 pipeline/cli.py --history hdfs://... --out report/
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from client.api import FlowApi
from pipeline.apply import apply, planned
from pipeline.episodes import DEFAULT_MAX_GAP, episodes
from pipeline.load import classify, input_quality, read_history, samples, within
from pipeline.recommend import DEFAULT_MARGIN, DEFAULT_TARGET, recommendations
from pipeline.report import Tables, render, write_tables
from pipeline.session import DEFAULT_DRIVER_MEMORY, spark_session
from pipeline.summary import hourly_summary


def _utc(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="flow-pipeline", description=(
        "Analyse flow-sidecar history with Spark: episodes, hourly summaries, threshold "
        "recommendations and an HTML report."))
    p.add_argument("--history", required=True, help="history directory or file; any "
                   "Spark-readable URI (file:, hdfs:, s3a:)")
    p.add_argument("--out", type=Path, required=True,
                   help="local directory for the CSV tables and report.html")
    p.add_argument("--since", type=_utc, help="ISO time (UTC unless an offset is given)")
    p.add_argument("--until", type=_utc, help="ISO time, exclusive")
    p.add_argument("--master", help="Spark master (default local[*], or spark-submit's)")
    p.add_argument("--driver-memory", default=DEFAULT_DRIVER_MEMORY,
                   help="JVM heap of the driver, which is also the executor on local[*] "
                   "(default 2g; under spark-submit use its own --driver-memory)")
    p.add_argument("--margin", type=float, default=DEFAULT_MARGIN,
                   help="safety margin below the queue's max, as a fraction (default 0.05)")
    p.add_argument("--target-transitions", type=float, default=DEFAULT_TARGET,
                   help="most transitions per hour before the gap is widened (default 12)")
    p.add_argument("--max-gap", type=float, default=DEFAULT_MAX_GAP,
                   help="seconds between samples beyond which time counts as unobserved: "
                   "episodes end before such a gap (keep it above --history-interval)")
    p.add_argument("--top", type=int, default=4, help="queues in the depth chart")
    p.add_argument("--apply", metavar="URL", help="send changed recommendations to the "
                   "sidecar at URL (a dry run unless --yes)")
    p.add_argument("--yes", action="store_true", help="with --apply: really write")
    p.add_argument("--token", help="with --apply --yes: the sidecar's bearer token")
    args = p.parse_args(argv)
    if args.yes and not (args.apply and args.token):
        p.error("--yes needs --apply URL and --token")
    if not 0 <= args.margin < 1:
        p.error("--margin must be a fraction in [0, 1)")
    if not 0 < args.max_gap <= 3600:
        p.error("--max-gap must be in (0, 3600] seconds")
    return args


def run(spark: SparkSession, args: argparse.Namespace) -> int:
    """Run every job once in `spark`; 0 on success, 2 when the history cannot be read, 1
    when an --apply write failed."""
    try:
        records = (read_history(spark, args.history, args.since, args.until)
                   .transform(within, args.since, args.until).transform(classify))
        quality = records.transform(input_quality).first()
    except AnalysisException as exc:
        print(f"flow-pipeline: cannot read {args.history}: {exc.getMessage()}", file=sys.stderr)
        return 2
    assert quality is not None
    # Parsing JSON twice (above for the counts, here for the samples) is cheaper than
    # caching every raw record; the samples are cached, every job reads them.
    clean = records.transform(samples).persist()
    found = clean.transform(episodes, args.max_gap).persist()
    hourly = clean.transform(hourly_summary, args.max_gap).persist()
    advice = clean.transform(recommendations, found, hourly, args.margin,
                             args.target_transitions).persist()
    tables = Tables(quality, clean, found, hourly, advice)
    counts = write_tables(tables, args.out)
    (args.out / "report.html").write_text(
        render(tables, title="Flow history report", target=args.target_transitions,
               top=args.top), encoding="utf-8")
    print(f"flow-pipeline: {quality['records']:,} records: {quality['samples']:,} samples, "
          f"{quality['corrupt']:,} corrupt, {quality['missingField']:,} missing a field; "
          f"{counts['episodes']:,} episodes, {counts['summary']:,} queue-hours, "
          f"{counts['recommendations']:,} recommendations; wrote {args.out}/report.html")
    failed = 0
    if args.apply:
        plan = planned(advice.filter("changed").collect())
        failed = apply(plan, FlowApi(args.apply, args.token), write=args.yes)
    for table in (clean, found, hourly, advice):
        table.unpersist()
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """`flow-pipeline`: parse options, run in a new session, stop it."""
    args = parse_args(argv)
    spark = spark_session(args.master, driver_memory=args.driver_memory)
    try:
        return run(spark, args)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
