#!/usr/bin/env bash
# One command to run the whole test suite: virtualenv + test extras, the same local RabbitMQ
# as deploy/run.sh, the other real parts the tests drive (Java for Spark, a Helm binary,
# headless Chromium, a Qpid C++ broker built once from source and cached, Node.js and the
# Node producer example's npm packages) when their ensure script exists, then pytest. tests/cluster starts its three-node RabbitMQ cluster itself
# (deploy/ensure-rabbitmq-cluster.sh, extra nodes beside the main one) and stops it at the end.
#
# Then the same core, live-depth, grants and broker-wide tests again against RabbitMQ 4.3
# (deploy/ensure-rabbitmq4.sh, a Debian chroot on ports of its own, built and started in
# the background while the 3.10 suite runs), and the statistics-off and broker-restart
# tests against RabbitMQ 4.0 with management statistics denied. FLOW_TEST_4X=0 skips those passes, 1 runs them
# even when pytest arguments are given; by default they run only for a whole-suite run.
# Extra arguments go to the first pytest run (e.g. -k thresholds).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bash "$repo/deploy/bootstrap.sh" test
bash "$repo/deploy/ensure-rabbitmq.sh"
for tool in java helm chromium qpidd node; do
  if [ -f "$repo/deploy/ensure-$tool.sh" ]; then bash "$repo/deploy/ensure-$tool.sh"; fi
done
cd "$repo"
run4=${FLOW_TEST_4X:-auto}
if [ "$run4" = auto ]; then if [ $# -eq 0 ]; then run4=1; else run4=0; fi; fi

# The subset that runs against 4.x: thresholds and signalling (core), live depth, grants,
# alarms and vhost quotas (broker-wide), less three slow tests of nothing broker-specific
# (many producers, an expired lease, kill -9). About 2 min; listed once, here. The 4.0 pass
# takes about 1 min more.
RMQ4_TESTS=(tests/integration/test_threshold_sources.py tests/integration/test_signalling.py
            tests/integration/test_live_depth.py tests/integration/test_grants.py
            tests/integration/test_broker_wide.py
            --deselect tests/integration/test_grants.py::test_concurrent_producers_never_exceed_headroom
            --deselect tests/integration/test_grants.py::test_a_holder_that_dies_blocks_nobody_beyond_its_lease
            --deselect tests/integration/test_broker_wide.py::test_vhost_quota_with_real_messages_survives_kill_9)
# Against 4.0 with statistics denied: what the sidecar says then, and a broker restart
# (last: it stops that node; the log must stay quiet).
RMQ4_DENIED_TESTS=(tests/integration/test_statistics_off.py
                   tests/integration/test_broker_restart.py)

if [ "$run4" = 1 ]; then
  logs=$(mktemp -d)
  bash deploy/ensure-rabbitmq4.sh 4.3 >"$logs/4.3" 2>&1 & start43=$!
  RMQ4_DENY_STATS=1 bash deploy/ensure-rabbitmq4.sh 4.0 >"$logs/4.0" 2>&1 & start40=$!
fi
status=0
"$repo/.venv/bin/python" -m pytest "$@" || status=$?
[ "$run4" = 1 ] || exit "$status"

against() {  # against VERSION START_PID PYTEST_ARGS...: the tests, with the node's FLOW_TEST_*
  local version=$1 pid=$2; shift 2
  if ! wait "$pid"; then
    echo "RabbitMQ $version did not start:" >&2; cat "$logs/$version" >&2; return 1
  fi
  echo "=== against $(grep -m1 "^RabbitMQ" "$logs/$version") ==="
  (eval "$(bash deploy/ensure-rabbitmq4.sh "$version" env)"
   export FLOW_TEST_RABBITMQ4=$version
   exec "$repo/.venv/bin/python" -m pytest -p no:cacheprovider "$@")
}
against 4.3 "$start43" "${RMQ4_TESTS[@]}" || status=1
RMQ4_DENY_STATS=1 FLOW_TEST_STATISTICS_DENIED=1 against 4.0 "$start40" "${RMQ4_DENIED_TESTS[@]}" || status=1
exit "$status"
