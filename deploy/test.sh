#!/usr/bin/env bash
# One command to run the whole test suite: virtualenv + test extras, the same local RabbitMQ
# as deploy/run.sh, the other real parts the tests drive (Java for Spark, a Helm binary,
# headless Chromium, a Qpid C++ broker built once from source and cached) when their ensure
# script exists, then pytest. tests/cluster starts its three-node RabbitMQ cluster itself
# (deploy/ensure-rabbitmq-cluster.sh, extra nodes beside the main one) and stops it at the end.
# Extra arguments go to pytest (e.g. -k thresholds).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bash "$repo/deploy/bootstrap.sh" test
bash "$repo/deploy/ensure-rabbitmq.sh"
for tool in java helm chromium qpidd; do
  if [ -f "$repo/deploy/ensure-$tool.sh" ]; then bash "$repo/deploy/ensure-$tool.sh"; fi
done
cd "$repo"
exec "$repo/.venv/bin/python" -m pytest "$@"
