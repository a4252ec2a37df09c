"""The report's charts: small aggregates, drawn by matplotlib as PNG.

Only aggregates reach them (a depth curve bucketed by Spark to at most `POINTS` points per
queue; a log-binned histogram and a top-N list folded from the tables by
`pipeline/figures.py`), so the charts cost the same for a thousand samples as for a
billion. Figures are drawn with matplotlib's object API (no pyplot, no
display backend) and returned as PNG bytes for embedding.
"""

from __future__ import annotations

import functools
import io
import operator
from collections import defaultdict

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter
from pyspark.sql import DataFrame, Row, Window
from pyspark.sql import functions as F

from pipeline.load import KEY

POINTS = 600


def label(vhost: str, queue: str) -> str:
    """A queue's name for people: the vhost only when it is not the default one."""
    return queue if vhost == "/" else f"{queue} (vhost {vhost})"


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return buffer.getvalue()


def depth_chart(samples: DataFrame, queues: list[tuple[str, str]]) -> bytes | None:
    """Depth against stop and resume over time, one panel per queue, ON time shaded.
    Messages when the queue has count thresholds, else bytes."""
    if not queues:
        return None
    # a filter, not a join: no broadcast (a Spark job of its own) and no shuffle of samples
    chosen = samples.filter(functools.reduce(operator.or_, [
        (F.col("vhost") == vhost) & (F.col("queue") == queue) for vhost, queue in queues]))
    per_queue = Window.partitionBy(*KEY)
    t0, t1 = F.min("ts").over(per_queue), F.max("ts").over(per_queue)
    buckets = (chosen.withColumn("bucket", F.floor(
                   (F.col("ts") - t0) / F.greatest((t1 - t0) / POINTS, F.lit(1.0))))
               .groupBy(*KEY, "bucket")
               .agg(F.min("ts").alias("ts"), F.max("messages").alias("messages"),
                    F.max("bytes").alias("bytes"), F.max("flowStopped").alias("on"),
                    *[F.max_by(c, "ts").alias(c) for c in
                      ("stopCount", "resumeCount", "stopSize", "resumeSize")])
               .collect())
    series: defaultdict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in sorted(buckets, key=lambda r: r["ts"]):  # at most POINTS a queue: no Spark sort
        series[(row["vhost"], row["queue"])].append(row)
    queues = [key for key in queues if series[key]]  # an incremental run: only its hours
    if not queues:
        return None
    figure = Figure(figsize=(11, 2.6 * len(queues)))
    for index, key in enumerate(queues, start=1):
        rows = series[key]
        axes = figure.add_subplot(len(queues), 1, index)
        by_count = any(r["stopCount"] is not None for r in rows)
        depth, stop, resume = (("messages", "stopCount", "resumeCount") if by_count
                               else ("bytes", "stopSize", "resumeSize"))
        hours = [(r["ts"] - rows[0]["ts"]) / 3600 for r in rows]
        axes.plot(hours, [r[depth] for r in rows], color="#1f77b4", lw=1, label=depth)
        axes.step(hours, [r[stop] for r in rows], where="post", color="#d62728", lw=1,
                  label="stop")
        axes.step(hours, [r[resume] for r in rows], where="post", color="#2ca02c", lw=1,
                  label="resume")
        top = max([r[depth] or 0 for r in rows] + [r[stop] or 0 for r in rows] + [1])
        axes.fill_between(hours, 0, top, where=[bool(r["on"]) for r in rows], step="post",
                          color="#d62728", alpha=0.12, label="flow stopped")
        axes.set_title(label(*key), fontsize=10, loc="left")
        axes.set_ylabel(depth)
        axes.legend(loc="upper right", fontsize=7, ncols=4)
    figure.axes[-1].set_xlabel("hours since the first sample")
    figure.tight_layout()
    return _png(figure)


def durations_chart(bins: list[tuple[int, int]]) -> bytes | None:
    """Histogram of episode durations on a log scale: (quarter-decade bin, episodes)."""
    if not bins:
        return None
    figure = Figure(figsize=(6, 3.2))
    axes = figure.add_subplot()
    lefts = [10 ** (b / 4) for b, _ in bins]
    axes.bar(lefts, [n for _, n in bins], width=[x * (10 ** 0.25 - 1) for x in lefts],
             align="edge", color="#9467bd")
    axes.set_xscale("log")
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.xaxis.set_minor_formatter(NullFormatter())
    axes.set_xlabel("episode duration (s)")
    axes.set_ylabel("episodes")
    axes.set_title("How long producers were held", fontsize=10, loc="left")
    return _png(figure)


def flapping_chart(busiest: list[tuple[tuple[str, str], int]], target: float
                   ) -> bytes | None:
    """Queues by transitions in their busiest hour, most first, against the target."""
    if not busiest:
        return None
    figure = Figure(figsize=(6, 0.35 * len(busiest) + 1.2))
    axes = figure.add_subplot()
    names = [label(*queue) for queue, _ in busiest]
    peaks = [peak for _, peak in busiest]
    axes.barh(names[::-1], peaks[::-1],
              color=["#d62728" if peak > target else "#7f7f7f" for peak in peaks][::-1])
    axes.axvline(target, color="black", ls="--", lw=1, label=f"target {target:g}/h")
    axes.set_xlabel("transitions in the busiest hour")
    axes.set_title("Flapping", fontsize=10, loc="left")
    axes.legend(fontsize=7)
    if max(peaks) > 50 * max(target, 1):
        axes.set_xscale("log")
    return _png(figure)

