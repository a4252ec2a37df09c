"""flow-pipeline on a real Spark standalone cluster (master and worker on 127.0.0.1, from
the installed pyspark, via deploy/spark-standalone.sh) gives the same tables as a local run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pyspark.sql import SparkSession

from pipeline import synthetic
from pipeline.cli import parse_args, run
from tests.utils.sidecar_process import free_port

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "spark-standalone.sh"
TABLES = ("input.csv", "episodes.csv", "summary.csv", "recommendations.csv")


def test_cluster_tables_equal_local_tables(spark: SparkSession, tmp_path: Path) -> None:
    history, cluster, local = tmp_path / "history", tmp_path / "cluster", tmp_path / "local"
    synthetic.generate(history, 4, 1800, seed=2)
    env = {**os.environ, "SPARK_MASTER_PORT": str(free_port()),
           "FLOW_SPARK_RUN": str(tmp_path / "spark")}

    def script(*args: str | Path) -> None:
        subprocess.run(["bash", str(SCRIPT), *map(str, args)], env=env, check=True,
                       timeout=180)

    script("start")
    try:
        script("submit", history, cluster)
    finally:
        script("stop")
    assert list((tmp_path / "spark" / "work").glob("app-*/0")), "no executor ran on the worker"

    assert run(spark, parse_args(["--history", str(history), "--out", str(local)])) == 0
    for name in TABLES:
        assert (cluster / name).read_text() == (local / name).read_text(), name
    assert len((local / "episodes.csv").read_text().splitlines()) > 5
