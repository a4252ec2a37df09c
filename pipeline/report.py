"""The pipeline's output: the tables as CSV files and one self-contained HTML report.

Output goes to a directory on the machine that runs the driver, whatever the master: the
tables are streamed to the driver (`toLocalIterator`, one partition at a time) and written
there, so a run on a cluster leaves the same files as a local run, with no part-files to
merge. The rows on their way are also folded into what the report lists and charts
(`pipeline/figures.py`), so the report needs no Spark job of its own but the depth chart.
It embeds its charts as base64 PNG so it can be mailed or attached to a ticket as a single
file.
"""

from __future__ import annotations

import base64
import csv
import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from pipeline import charts
from pipeline.figures import Figures
from pipeline.graded_tables import HEADERS as GRADED_HEADERS
from pipeline.graded_tables import Graded

TIME_COLUMNS = ("start", "end", "hour")
ISO = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"


def readable(table: DataFrame) -> DataFrame:
    """Epoch-second time columns as UTC ISO-8601 text (the session time zone is UTC)."""
    for name in TIME_COLUMNS:
        if name in table.columns:
            table = table.withColumn(name, F.date_format(F.timestamp_seconds(name), ISO))
    return table


def write_csv(table: DataFrame, path: Path, order: Sequence[str],
              fold: Callable[[Row], None]) -> int:
    """Write a table sorted by `order` with a header row, passing each row to `fold`; the
    number of rows. The table is sorted in one partition (the tables are small next to
    the samples), so streaming it to the driver is one Spark job, where a global sort
    takes one job per partition."""
    count = 0
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(table.columns)
        ordered = table.repartition(1).sortWithinPartitions(*order)
        for row in ordered.transform(readable).toLocalIterator():
            out.writerow(["" if v is None else v for v in row])
            fold(row)
            count += 1
    return count


@dataclass
class Tables:
    """What one run produced, as Spark DataFrames."""

    quality: Row
    samples: DataFrame  # the run's timeline: the samples analysed in this run
    episodes: DataFrame
    summary: DataFrame
    recommendations: DataFrame


def write_tables(tables: Tables, out: Path, figures: Figures,
                 graded: Graded | None = None) -> dict[str, int]:
    """episodes.csv, summary.csv, recommendations.csv and input.csv, their rows folded
    into `figures` (and the summary's into `graded`, for flapping); rows per file."""
    def hour(row: Row) -> None:
        figures.hour(row)
        if graded is not None:
            graded.hour(row)

    out.mkdir(parents=True, exist_ok=True)
    with open(out / "input.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([list(tables.quality.asDict()),
                                 list(tables.quality.asDict().values())])
    return {
        "episodes": write_csv(tables.episodes, out / "episodes.csv",
                              ["vhost", "queue", "start"], figures.episode),
        "summary": write_csv(tables.summary, out / "summary.csv", ["vhost", "queue", "hour"],
                             hour),
        "recommendations": write_csv(tables.recommendations, out / "recommendations.csv",
                                     ["vhost", "queue", "dimension"], figures.recommendation),
    }


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]], css: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(
        f"<td>{html.escape('' if v is None else str(v))}</td>" for v in row) + "</tr>"
        for row in rows)
    return f"<table class='{css}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _pair(stop: int | None, resume: int | None) -> str:
    return "none" if stop is None else f"{stop:,} / {resume:,}"


def _image(png: bytes | None, alt: str) -> str:
    if png is None:
        return f"<p class=note>No data for: {html.escape(alt)}.</p>"
    data = base64.b64encode(png).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


STYLE = """body{font:14px system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}.note{color:#666}.bad{color:#b00}img{max-width:100%}
.reasons td:last-child{min-width:440px}
.figs{display:flex;gap:16px;flex-wrap:wrap;align-items:flex-start}"""

REC_HEADERS = ("queue", "dimension", "max", "peak", "stop / resume now", "recommended",
               "flag", "why")
EPISODE_HEADERS = ("queue", "start", "end", "seconds", "peak messages", "peak bytes",
                   "overshoot messages", "overshoot bytes")


def render(tables: Tables, figures: Figures, *, title: str, target: float,
           top: int = 4, graded: Sequence[Sequence[object]] = ()) -> str:
    """The report page: input quality, charts, recommendations, the longest episodes
    (`figures`: folded from the tables by `write_tables`), warnings and who filled the
    queues (`graded`: `Graded.report_rows`)."""
    q = tables.quality
    problems = q["corrupt"] + q["missingField"]
    quality = (f"<p>{q['records']:,} records read: {q['samples']:,} samples, "
               f"{q['transitions']:,} transitions; <span class={'bad' if problems else 'note'}>"
               f"{q['corrupt']:,} corrupt, {q['missingField']:,} missing a field</span>, "
               f"{q['otherType']:,} of another type (skipped).</p>")
    recs, longest = figures.recommendations(), figures.longest()
    rec_table = _table(REC_HEADERS, [
        (charts.label(r["vhost"], r["queue"]), r["dimension"], f"{r['maximum']:,}",
         f"{r['peak']:,}", _pair(r["currentStop"], r["currentResume"]),
         _pair(r["recommendedStop"], r["recommendedResume"]), r["flag"], r["reason"])
        for r in recs], "reasons")
    episode_table = _table(EPISODE_HEADERS, [
        (charts.label(e["vhost"], e["queue"]), e["start"], e["end"], e["durationSeconds"],
         e["peakMessages"], e["peakBytes"], e["overshootMessages"], e["overshootBytes"])
        for e in longest])
    return f"""<!doctype html><html lang=en><head><meta charset=utf-8>
<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>{quality}
<h2>Depth against the thresholds, for the queues stopped most often</h2>
{_image(charts.depth_chart(tables.samples, figures.top_queues(top)), "depth over time")}
<div class=figs>{_image(charts.durations_chart(figures.durations()), "episode durations")}
{_image(charts.flapping_chart(figures.flapping(), target), "flapping")}</div>
<h2>Recommendations that change something or flag a queue (first
{figures.recommendation_count})</h2>
<p class=note>All of them, with every figure they rest on: recommendations.csv.</p>
{rec_table}
<h2>Longest episodes</h2><p class=note>Every episode: episodes.csv; per queue and hour:
summary.csv; what the input held: input.csv.</p>
{episode_table}
<h2>Warnings, flapping and who filled the queues (first {len(graded)} by stops)</h2>
<p class=note>Every queue: graded.csv; every stop with its top producers: stops.csv.
Lead times run from a warning's start to the stop it preceded; flapping is stops per
observed hour before and after pacing or classes were enabled (docs/history.md).</p>
{_table(GRADED_HEADERS, graded)}
</body></html>
"""
