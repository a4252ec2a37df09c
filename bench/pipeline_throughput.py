"""flow-pipeline throughput on local[2]: history samples per second, and peak memory.

    .venv/bin/python bench/pipeline_throughput.py [--sizes 10000000] [--keep DIR]
    .venv/bin/python bench/pipeline_throughput.py --sizes --day 10000 [--limit 1800]

For each size, synthetic history (pipeline/synthetic.py, 500 queues, as many seconds as it
takes to record that many samples, with the transition records that come with them) is
written once as JSON Lines, then compacted (`flow-pipeline compact`, timed, bytes per
sample), and `flow-pipeline --master local[2]` runs on each form as a separate process, as
a user runs it; the bench samples the resident memory of that process tree (the Python
driver plus the JVM, which in local mode is also the executor) every 0.2 s.

Baselines in the same run: a start-up run on 1,000 samples (JVM and session start, and
the fixed cost of every Spark job), the same job on the JSON Lines (what every run cost
before compaction), and plain Python reading the same JSON files (`json.loads` per line,
nothing else): what any single-process analysis costs at best before it does any work.
The runs keep their class-data archive (pipeline/launch.py) in a cache of the bench's
own, emptied at its start: the first run, on the 1,000 JSON Lines samples, is what a
user's first run after an install costs (it writes the archive); later runs map it.

`--day QUEUES` writes a day of QUEUES queues sampled every 5 s (`pipeline.synthetic
--parquet`: 173M samples for 10,000) and runs the job on the standalone cluster of
deploy/spark-standalone.sh, stopped after `--limit` seconds (then the rate so far, from
the hours it finished: it runs as incremental runs of `--step` hours), its worker and
executor given `SPARK_WORKER_MEMORY` (default DAY_MEMORY, 8g).

Each run prints how many Spark jobs it took. Where the seconds go: run the bench with
`SPARK_CONF_DIR` naming a directory whose spark-defaults.conf sets `spark.eventLog.enabled
true` and `spark.eventLog.dir`; the event log has each job's and stage's times, spills
and shuffle bytes (docs/benchmarks.md#the-pipelines-jvm-and-spark-settings quotes them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.synthetic import START, records  # noqa: E402
from sidecar.records.history import HistoryFiles, Record  # noqa: E402

QUEUES = 500
PIPELINE = Path(sys.executable).with_name("flow-pipeline")
STANDALONE = ROOT / "deploy" / "spark-standalone.sh"
DAY_MEMORY = "8g"  # the cluster's worker for --day (SPARK_WORKER_MEMORY): six hours of
# 10,000 queues is 43M samples a run, their timeline cached in the executor
ENV = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}


def with_samples(count: int) -> Iterator[Record]:
    """Synthetic records in time order until exactly `count` samples are among them."""
    seen = 0
    for record in records(QUEUES, 10**7, seed=1):
        yield record
        seen += record["type"] == "sample"
        if seen == count:
            return


def write_history(directory: Path, count: int) -> None:
    """History with `count` samples (the simulation runs as long as needed)."""
    files = HistoryFiles(directory)
    try:
        files.append(with_samples(count))
    finally:
        files.close()


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            continue
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += rss.get(current, 0)
        todo.extend(children.get(current, []))
    return total


def measured(command: list[str], log: Path) -> tuple[float, int, str]:
    """Wall seconds, peak tree RSS and standard output of one command."""
    started = time.perf_counter()
    with open(log, "w") as errors:
        proc = subprocess.Popen(command, env=ENV, stdout=subprocess.PIPE, stderr=errors,
                                text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        time.sleep(0.2)
    elapsed = time.perf_counter() - started
    output = proc.stdout.read() if proc.stdout else ""
    if proc.returncode != 0:
        raise SystemExit(f"{command} failed: {output}; see {log}")
    print("   ", output.strip())
    return elapsed, peak, output


def run_pipeline(history: Path, out: Path, *options: str) -> tuple[float, int]:
    """Wall seconds and peak tree RSS of one flow-pipeline run."""
    elapsed, peak, _ = measured([str(PIPELINE), "--master", "local[2]", "--history",
                                 str(history), "--out", str(out), *options],
                                out.with_suffix(".log"))
    return elapsed, peak


def compacted(history: Path, target: Path) -> tuple[float, float]:
    """A compacted copy of `history`: seconds `flow-pipeline compact` took, and its
    Parquet bytes per record (a copy left by an earlier run with --keep is replaced)."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(history, target)
    elapsed, _, output = measured([str(PIPELINE), "compact", "--master", "local[2]",
                                   "--history", str(target)], target.with_suffix(".log"))
    return elapsed, float(output.split("(")[1].split(" bytes a record")[0])


def plain_python(history: Path) -> float:
    """Seconds to json.loads every line of every file (single process)."""
    started = time.perf_counter()
    kinds: dict[str, int] = {}
    for path in sorted(history.rglob("*.jsonl")):
        with open(path, "rb") as f:
            for line in f:
                kind = json.loads(line)["type"]
                kinds[kind] = kinds.get(kind, 0) + 1
    return time.perf_counter() - started


def day(work: Path, queues: int, limit: float, step: int) -> None:
    """A day of `queues` queues on the standalone cluster, `step` hours a run, for at
    most `limit` seconds."""
    history, out = work / f"day-{queues}", work / f"day-{queues}-out"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipeline.synthetic", "--parquet", "--out",
                    str(history), "--queues", str(queues), "--seconds", "86400"],
                   env=ENV, check=True, capture_output=True)
    size = sum(p.stat().st_size for p in history.rglob("*.parquet"))
    per_hour = queues * 720
    print(f"day of {queues:,} queues: {24 * per_hour:,} samples generated in "
          f"{time.perf_counter() - started:.0f} s ({size / 2**30:.2f} GiB of Parquet, "
          f"{size / (24 * per_hour):.1f} bytes a sample)")
    env = {**ENV, "SPARK_MASTER_PORT": "7177", "FLOW_SPARK_RUN": str(work / "spark"),
           "SPARK_WORKER_MEMORY": os.environ.get("SPARK_WORKER_MEMORY", DAY_MEMORY)}
    subprocess.run(["bash", str(STANDALONE), "start"], env=env, check=True)
    done, spent = 0, 0.0
    try:
        while done < 24 and spent < limit:
            until = time.strftime("%Y-%m-%dT%H:%M:%S",
                                  time.gmtime(START + min(24, done + step) * 3600))
            command = ["bash", str(STANDALONE), "submit", str(history), str(out), "--since",
                       "--until", until]
            run_started = time.perf_counter()
            # its own process group: a run stopped at the limit takes its spark-submit
            # JVM with it (killing the script alone left the driver running)
            submitted = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True)
            try:
                if submitted.wait(timeout=limit - spent) != 0:
                    raise SystemExit(f"{command} failed")
            except subprocess.TimeoutExpired:
                os.killpg(submitted.pid, signal.SIGTERM)
                submitted.wait()
                spent = limit
                break
            spent += time.perf_counter() - run_started
            done = min(24, done + step)
            print(f"    hours 0-{done}: {spent:.0f} s so far")
    finally:
        subprocess.run(["bash", str(STANDALONE), "stop"], env=env, check=True)
    state = "done" if done == 24 else f"stopped at {limit:.0f} s"
    print(f"day of {queues:,} queues on the standalone cluster ({state}): {done} hours, "
          f"{done * per_hour:,} samples in {spent:.0f} s: "
          f"{done * per_hour / max(spent, 1e-9):,.0f} samples/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000_000])
    parser.add_argument("--keep", type=Path, help="write the histories here and keep them")
    parser.add_argument("--day", type=int, metavar="QUEUES",
                        help="also a day of QUEUES queues on the standalone cluster")
    parser.add_argument("--limit", type=float, default=1800, help="seconds for --day")
    parser.add_argument("--step", type=int, default=6, help="hours per run for --day")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="flow-bench-"))
    print(f"local[2] on {os.cpu_count()} cores; histories in {work}; load "
          f"{os.getloadavg()[0]:.1f}")
    sizes = [1_000, *dict.fromkeys(s for s in args.sizes if s != 1_000)] if args.sizes else []
    shutil.rmtree(work / "cache", ignore_errors=True)
    ENV["XDG_CACHE_HOME"] = str(work / "cache")
    for size in sizes:
        history = work / f"history-{size}"
        if not history.exists():
            started = time.perf_counter()
            write_history(history, size)
            print(f"{size:>11,} samples generated in {time.perf_counter() - started:.0f} s "
                  f"({sum(p.stat().st_size for p in history.rglob('*.jsonl')) / 2**20:,.0f}"
                  " MiB of JSON Lines)")
        if size == sizes[0]:
            elapsed, _ = run_pipeline(history, work / "out-first")
            print(f"{size:>11,} samples from JSON Lines, first run (writes the class "
                  f"archive): {elapsed:6.1f} s")
        seconds, per_record = compacted(history, work / f"parquet-{size}")
        print(f"{size:>11,} samples compacted in {seconds:.0f} s: {per_record:.1f} bytes a "
              "record as Parquet")
        for form in ("parquet", "history"):
            elapsed, peak = run_pipeline(work / f"{form}-{size}", work / f"out-{form}-{size}")
            print(f"{size:>11,} samples from {'JSON Lines' if form == 'history' else form}: "
                  f"{elapsed:6.1f} s, {size / elapsed:,.0f} samples/s end to end, peak RSS "
                  f"{peak / 2**20:,.0f} MiB")
        if size == sizes[-1]:
            python_seconds = plain_python(history)
            print(f"plain Python json.loads of the {size:,}-sample files: "
                  f"{size / python_seconds:,.0f} samples/s (1 core)")
    if args.day:
        day(work, args.day, args.limit, args.step)
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
