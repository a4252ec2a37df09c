#!/usr/bin/env bash
# A real Spark standalone cluster on this machine, from the pyspark in .venv, on 127.0.0.1
# only: one master, one worker. Shows that flow-pipeline runs unchanged on a cluster.
#
#   deploy/spark-standalone.sh start            master spark://127.0.0.1:$SPARK_MASTER_PORT
#   deploy/spark-standalone.sh stop
#   deploy/spark-standalone.sh submit HISTORY OUT [options]   flow-pipeline on the cluster
#   deploy/spark-standalone.sh check HISTORY    start, run flow-pipeline with spark-submit on
#                                               the cluster and locally, compare the tables
#                                               (exit 1 when they differ), stop
#
# Environment: SPARK_MASTER_PORT (7077), SPARK_WORKER_CORES (2), SPARK_WORKER_MEMORY (2g:
# the worker's, all of it for its one executor),
# FLOW_SPARK_RUN (pid files, logs, work dir; default /tmp/flow-spark-$SPARK_MASTER_PORT).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python="$repo/.venv/bin/python"
port=${SPARK_MASTER_PORT:-7077}
run=${FLOW_SPARK_RUN:-/tmp/flow-spark-$port}
master="spark://127.0.0.1:$port"
export SPARK_HOME=${SPARK_HOME:-$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}
export SPARK_LOCAL_IP=127.0.0.1       # every daemon, UI and driver binds to loopback
export PYSPARK_PYTHON="$python" PYSPARK_DRIVER_PYTHON="$python"

wait_for() {  # wait_for LOGFILE PATTERN SECONDS
  for _ in $(seq 1 $(($3 * 5))); do
    if grep -q "$2" "$1" 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  echo "spark-standalone: '$2' not in $1 after $3 s:" >&2; tail -n 20 "$1" >&2; return 1
}

start() {
  mkdir -p "$run/work"
  "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
    --host 127.0.0.1 --port "$port" --webui-port 0 >"$run/master.log" 2>&1 &
  echo $! >"$run/master.pid"
  wait_for "$run/master.log" "I have been elected leader" 60
  "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
    --host 127.0.0.1 --port 0 --webui-port 0 --cores "${SPARK_WORKER_CORES:-2}" \
    --memory "${SPARK_WORKER_MEMORY:-2g}" --work-dir "$run/work" "$master" \
    >"$run/worker.log" 2>&1 &
  echo $! >"$run/worker.pid"
  wait_for "$run/worker.log" "Successfully registered with master" 60
  echo "spark-standalone: $master (logs in $run)"
}

stop() {
  for role in worker master; do
    if [ -f "$run/$role.pid" ]; then
      pid=$(cat "$run/$role.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$run/$role.pid"
    fi
  done
}

submit() {  # submit HISTORY OUT [flow-pipeline options]
  history=$1 out=$2
  shift 2
  # the worker's one executor gets all its memory (Spark's default, 1g, runs out of heap
  # caching the timeline of 43M samples, six hours of 10,000 queues)
  "$SPARK_HOME/bin/spark-submit" --master "$master" --conf spark.ui.enabled=false \
    --executor-memory "${SPARK_WORKER_MEMORY:-2g}" \
    --conf spark.log.level=WARN "$repo/pipeline/cli.py" --history "$history" --out "$out" "$@"
}

check() {
  history=$1
  trap stop EXIT
  start
  submit "$history" "$run/cluster"
  "$python" -m pipeline --master 'local[2]' --history "$history" --out "$run/local"
  if diff -r --exclude report.html "$run/local" "$run/cluster"; then
    echo "spark-standalone: the cluster's tables equal the local run's ($run/cluster)"
  else
    echo "spark-standalone: the cluster's tables differ from the local run's" >&2
    exit 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  submit) [ $# -ge 3 ] || { echo "usage: $0 submit HISTORY OUT [options]" >&2; exit 2; }
          shift; submit "$@" ;;
  check) [ -n "${2:-}" ] || { echo "usage: $0 check HISTORY" >&2; exit 2; }; check "$2" ;;
  *) echo "usage: $0 start|stop|submit HISTORY OUT|check HISTORY" >&2; exit 2 ;;
esac
