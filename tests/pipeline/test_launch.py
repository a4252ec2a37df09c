"""flow-pipeline started as a user starts it, with its own JVM (pipeline/launch.py): the
first run writes the class-data archive to the cache, the next maps it, and a damaged
archive changes nothing but the time. The tables are the same each time, and standard
output holds the CLI's line alone (no JVM message)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipeline import synthetic

FLOW_PIPELINE = Path(sys.executable).with_name("flow-pipeline")
TABLES = ("input.csv", "episodes.csv", "summary.csv", "recommendations.csv")


def test_the_class_archive_is_written_mapped_and_survives_damage(tmp_path: Path) -> None:
    history = tmp_path / "history"
    synthetic.generate(history, 3, 900, seed=4)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONF_DIR",
                                                            "PYSPARK_GATEWAY_PORT")}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), SPARK_LOCAL_IP="127.0.0.1")

    def tables(out: Path) -> dict[str, str]:
        done = subprocess.run([str(FLOW_PIPELINE), "--master", "local[2]", "--history",
                               str(history), "--out", str(out)], check=False, env=env,
                              text=True, capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("flow-pipeline: "), done.stdout
        assert len(done.stdout.splitlines()) == 1, done.stdout
        return {name: (out / name).read_text() for name in TABLES}

    first = tables(tmp_path / "first")
    cache = tmp_path / "cache" / "flow-pipeline"
    (archive,) = cache.glob("spark-*.jsa")
    assert archive.stat().st_size > 10 * 2**20 and not list(cache.glob("*.partial"))
    assert tables(tmp_path / "mapped") == first
    archive.chmod(0o644)
    archive.write_bytes(b"not a class-data archive")
    assert tables(tmp_path / "damaged") == first
    assert len((tmp_path / "first" / "episodes.csv").read_text().splitlines()) > 1
