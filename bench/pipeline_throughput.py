"""flow-pipeline throughput on local[2]: history samples per second, and peak memory.

    .venv/bin/python bench/pipeline_throughput.py [--sizes 1000000 10000000] [--keep DIR]

For each size, synthetic history (pipeline/synthetic.py, 500 queues, as many seconds as it
takes to record that many samples, with the transition records that come with them) is
written once, then `flow-pipeline --master local[2]` runs on it as a separate
process, as a user runs it; the bench samples the resident memory of that process tree
(the Python driver plus the JVM, which in local mode is also the executor) every 0.2 s.

Baselines in the same run: a start-up run on 1,000 samples (JVM and session start, and
the fixed cost of ~25 Spark jobs), and plain Python reading the same 1M-sample files
(`json.loads` per line, nothing else): what any single-process analysis costs at best
before it does any work. Throughput is printed both end to end and net of start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.synthetic import records  # noqa: E402
from sidecar.records.history import HistoryFiles, Record  # noqa: E402

QUEUES = 500
PIPELINE = Path(sys.executable).with_name("flow-pipeline")


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


def run_pipeline(history: Path, out: Path) -> tuple[float, int]:
    """Wall seconds and peak tree RSS of one flow-pipeline run."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    started = time.perf_counter()
    log = out.with_suffix(".log")
    with open(log, "w") as errors:
        proc = subprocess.Popen([str(PIPELINE), "--master", "local[2]", "--history",
                                 str(history), "--out", str(out)], env=env,
                                stdout=subprocess.PIPE, stderr=errors, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        time.sleep(0.2)
    elapsed = time.perf_counter() - started
    output = proc.stdout.read() if proc.stdout else ""
    if proc.returncode != 0:
        raise SystemExit(f"flow-pipeline failed on {history}: {output}; see {log}")
    print("   ", output.strip())
    return elapsed, peak


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--keep", type=Path, help="write the histories here and keep them")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="flow-bench-"))
    print(f"local[2] on {os.cpu_count()} cores; histories in {work}")

    results = {}
    for size in [1_000, *args.sizes]:
        history = work / f"history-{size}"
        if not history.exists():
            started = time.perf_counter()
            write_history(history, size)
            print(f"{size:>11,} samples generated in {time.perf_counter() - started:.0f} s "
                  f"({sum(p.stat().st_size for p in history.rglob('*.jsonl')) / 2**20:,.0f} MiB)")
        elapsed, peak = run_pipeline(history, work / f"out-{size}")
        results[size] = (elapsed, peak)
        print(f"{size:>11,} samples: flow-pipeline {elapsed:6.1f} s, peak RSS "
              f"{peak / 2**20:,.0f} MiB")

    startup = results[1_000][0]
    print(f"\nstart-up baseline (1,000 samples): {startup:.1f} s")
    for size in args.sizes:
        elapsed, peak = results[size]
        print(f"{size:>11,} samples: {size / elapsed:>9,.0f} samples/s end to end, "
              f"{size / max(elapsed - startup, 1e-9):>9,.0f} samples/s net of start-up, "
              f"peak RSS {peak / 2**20:,.0f} MiB")
    first = args.sizes[0]
    python_seconds = plain_python(work / f"history-{first}")
    print(f"plain Python json.loads of the {first:,}-sample files: "
          f"{first / python_seconds:,.0f} samples/s (1 core)")
    for size in args.sizes:
        elapsed = results[size][0] - startup
        print(f"ratio, net flow-pipeline / plain-Python parse, {size:,}: "
              f"{(size / elapsed) / (first / python_seconds):.2f}x")
    if len(args.sizes) > 1:
        small, big = args.sizes[0], args.sizes[-1]
        per_small = (results[small][0] - startup) / small
        per_big = (results[big][0] - startup) / big
        print(f"scaling: {big:,} samples cost {per_big / per_small:.2f}x per sample of "
              f"{small:,} (1.00 = linear)")


if __name__ == "__main__":
    main()
