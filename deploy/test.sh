#!/usr/bin/env bash
# One command to run the whole test suite: virtualenv + test extras, the same local RabbitMQ
# as deploy/run.sh, then pytest. Extra arguments go to pytest (e.g. -k thresholds).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bash "$repo/deploy/bootstrap.sh" test
bash "$repo/deploy/ensure-rabbitmq.sh"
cd "$repo"
exec "$repo/.venv/bin/python" -m pytest "$@"
