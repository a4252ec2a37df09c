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
import time
from datetime import UTC, datetime
from pathlib import Path

from pyspark import SparkContext
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from flow_sidecar_client.api import FlowApi
from pipeline import state
from pipeline.analysis import analyse, outputs
from pipeline.apply import apply, planned
from pipeline.compact import compact
from pipeline.episodes import DEFAULT_MAX_GAP
from pipeline.figures import Figures
from pipeline.files import HistoryNotFound
from pipeline.graded_tables import Graded
from pipeline.launch import for_run
from pipeline.layout import CLOSED_AFTER, HOUR
from pipeline.load import classify, read_history, within
from pipeline.recommend import DEFAULT_MARGIN, DEFAULT_TARGET
from pipeline.report import Tables, render, write_tables
from pipeline.session import DEFAULT_DRIVER_MEMORY, spark_session
from pipeline.tuning import sized

INCREMENTAL = "last"
JOB_GROUP = "flow-pipeline"
MEMORY_HELP = ("JVM heap of the driver, which is also the executor on local[*] (default: "
               f"sized from a local history, {DEFAULT_DRIVER_MEMORY} and up; under "
               "spark-submit use its own --driver-memory)")


def _utc(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _since(text: str) -> datetime | str:
    return INCREMENTAL if text == INCREMENTAL else _utc(text)


def _compact_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="flow-pipeline compact", description=(
        "Turn the closed hours of a history directory into Parquet (run it hourly)."))
    p.add_argument("--history", required=True, help="history directory; any Spark URI")
    p.add_argument("--master", help="Spark master (default local[*], or spark-submit's)")
    p.add_argument("--driver-memory", help=MEMORY_HELP)
    args = p.parse_args(argv)
    args.command = "compact"
    return args


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["compact"]:
        return _compact_args(argv[1:])
    p = argparse.ArgumentParser(prog="flow-pipeline", description=(
        "Analyse flow-sidecar history with Spark: episodes, hourly summaries, threshold "
        "recommendations and an HTML report."))
    p.add_argument("--history", required=True, help="history directory or file; any "
                   "Spark-readable URI (file:, hdfs:, s3a:)")
    p.add_argument("--out", type=Path, required=True,
                   help="local directory for the CSV tables and report.html")
    p.add_argument("--since", type=_since, nargs="?", const=INCREMENTAL,
                   help="ISO time (UTC unless an offset is given); alone (or `last`): an "
                   "incremental run that analyses only the closed hours not analysed yet "
                   "and merges them into the state kept in --state")
    p.add_argument("--until", type=_utc, help="ISO time, exclusive")
    p.add_argument("--state", help="incremental runs' state (default OUT/state; any "
                   "Spark URI)")
    p.add_argument("--explain", action="store_true",
                   help="print the physical plan of each output table")
    p.add_argument("--master", help="Spark master (default local[*], or spark-submit's)")
    p.add_argument("--driver-memory", help=MEMORY_HELP)
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
    args.command = "analyse"
    if args.yes and not (args.apply and args.token):
        p.error("--yes needs --apply URL and --token")
    if not 0 <= args.margin < 1:
        p.error("--margin must be a fraction in [0, 1)")
    if not 0 < args.max_gap <= 3600:
        p.error("--max-gap must be in (0, 3600] seconds")
    return args


def _window(spark: SparkSession, args: argparse.Namespace
            ) -> tuple[float | None, float | None, state.State | None, str | None]:
    """(since, until, previous state, state URI) of this run. An incremental run starts
    where the state ends and stops at the last closed hour (or --until, to the hour)."""
    until = args.until.timestamp() if args.until else None
    if args.since != INCREMENTAL:
        return (args.since.timestamp() if args.since else None), until, None, None
    uri = args.state or args.out.absolute().joinpath("state").as_uri()
    previous = state.load(spark, uri)
    closed = time.time() - CLOSED_AFTER if until is None else min(until, time.time() - CLOSED_AFTER)
    return (previous.until if previous else None), closed // HOUR * HOUR, previous, uri


def run(spark: SparkSession, args: argparse.Namespace) -> int:
    """Run every job once in `spark`; 0 on success, 2 when the history cannot be read, 1
    when an --apply write failed."""
    if args.command == "compact":
        print(compact(spark, args.history).line())
        return 0
    spark.sparkContext.setJobGroup(JOB_GROUP, "flow-pipeline", interruptOnCancel=True)
    since, until, previous, uri = _window(spark, args)
    try:
        history, estimate = read_history(spark, args.history, since, until)
    except (AnalysisException, HistoryNotFound) as exc:
        message = exc.getMessage() if isinstance(exc, AnalysisException) else str(exc)
        print(f"flow-pipeline: cannot read {args.history}: {message}", file=sys.stderr)
        return 2
    records = history.transform(within, since, until).transform(classify)
    with sized(spark, estimate):
        return _analysed(spark, args, records, previous, uri, since, until)


def _analysed(spark: SparkSession, args: argparse.Namespace, records: DataFrame,
              previous: state.State | None, uri: str | None, since: float | None,
              until: float | None) -> int:
    """Analyse classified `records`, write the tables and the report, --apply."""
    analysed = analyse(records, previous.partials if previous else None, args.max_gap)
    partials = analysed.partials
    if uri is not None:  # incremental: keep what was merged, go on from the written copy
        assert until is not None
        saved = state.save(spark, uri, partials, max(until, since or until))
        partials = saved.partials
    tables = outputs(partials, args.max_gap, args.margin, args.target_transitions)
    for table in (tables.episodes, tables.summary, tables.recommendations):
        table.persist()
        if args.explain:
            table.explain(mode="formatted")
    quality = partials.quality.first()
    assert quality is not None
    report, figures, graded = Tables(quality, analysed.timeline, tables.episodes,
                                     tables.summary, tables.recommendations), Figures(), Graded()
    counts = write_tables(report, args.out, figures, graded)
    graded.gather(records)
    per_queue, stops = graded.write(args.out)
    (args.out / "report.html").write_text(
        render(report, figures, title="Flow history report", target=args.target_transitions,
               top=args.top, graded=graded.report_rows(per_queue, stops)), encoding="utf-8")
    print(f"flow-pipeline: {quality['records']:,} records: {quality['samples']:,} samples, "
          f"{quality['corrupt']:,} corrupt, {quality['missingField']:,} missing a field; "
          f"{counts['episodes']:,} episodes, {counts['summary']:,} queue-hours, "
          f"{counts['recommendations']:,} recommendations, {len(stops):,} stops; wrote "
          f"{args.out}/report.html "
          f"({len(spark.sparkContext.statusTracker().getJobIdsForGroup(JOB_GROUP))} "
          "Spark jobs)")
    failed = 0
    if args.apply:
        plan = planned(tables.recommendations.filter("changed").collect())
        failed = apply(plan, FlowApi(args.apply, args.token), write=args.yes)
    for table in (*analysed.cached, tables.episodes, tables.summary, tables.recommendations):
        table.unpersist()
    if uri is not None:
        state.prune(spark, uri, keep=saved.version)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """`flow-pipeline`: parse options, run in a new session, stop it."""
    args = parse_args(argv)
    since = getattr(args, "since", None)
    until = getattr(args, "until", None)
    start = for_run(args.history, args.master,
                    since.timestamp() if isinstance(since, datetime) else None,
                    until.timestamp() if until else None)
    spark = spark_session(args.master, java_options=start.java_options, driver_memory=(
        args.driver_memory or start.driver_memory or DEFAULT_DRIVER_MEMORY))
    try:
        return run(spark, args)
    finally:
        spark.stop()
        start.stopped(SparkContext._gateway)


if __name__ == "__main__":
    sys.exit(main())
