"""The one way the jobs and the tests get a SparkSession.

Time arithmetic in the jobs is done on epoch seconds, but timestamps shown to people (CSV,
report) go through Spark's session time zone, so it is pinned to UTC here: the same history
gives the same tables on any machine. No master is forced: `--master` sets one, otherwise
spark-submit's (or pyspark's own default, `local[*]`) applies, so the job runs unchanged on
a cluster. `driver_memory` only counts when this process starts the JVM (flow-pipeline run
directly); under spark-submit its own `--driver-memory` has already decided. In local mode
the driver is also the executor, and Spark's default of 1 GiB runs out of heap on
millions of samples (`pipeline/launch.py` sizes it). With a local `master` the web UI is not started (a second of
start-up, and nobody watches a local batch job's UI); on a cluster it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession

DEFAULT_DRIVER_MEMORY = "2g"


def spark_session(master: str | None = None, *, app_name: str = "flow-pipeline",
                  shuffle_partitions: int | None = None,
                  driver_memory: str = DEFAULT_DRIVER_MEMORY,
                  java_options: Sequence[str] = ()) -> SparkSession:
    """Get or create the session the jobs run in (`java_options`: the driver JVM's,
    which count only when this call starts it; see `pipeline/launch.py`)."""
    builder = (SparkSession.builder.appName(app_name)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", driver_memory)
               # let adaptive execution shrink the 200 default shuffle partitions of the
               # persisted intermediate tables too (it leaves cached plans alone otherwise)
               .config("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true"))
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):
        builder = builder.config("spark.ui.enabled", "false")
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(java_options))
    if shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
