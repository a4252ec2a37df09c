#!/usr/bin/env bash
# One command to run flow-sidecar next to a local RabbitMQ:
# virtualenv + install, a broker at FLOW_MANAGEMENT_URL (installed from Debian's packages
# when none answers), then the sidecar in the foreground on FLOW_LISTEN (127.0.0.1:8080).
# Extra arguments go to flow-sidecar, e.g. deploy/run.sh --poll-interval 0.5
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bash "$repo/deploy/bootstrap.sh"
bash "$repo/deploy/ensure-rabbitmq.sh"
cd "$repo"
exec "$repo/.venv/bin/flow-sidecar" "$@"
