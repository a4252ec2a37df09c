#!/usr/bin/env bash
# A three-node RabbitMQ cluster on this machine, for the cluster tests (tests/cluster) and
# for trying flow-sidecar's shared state by hand. Idempotent: a second `start` while the
# cluster runs returns at once.
#
#   deploy/ensure-rabbitmq-cluster.sh start    start the nodes, join them, wait for all three
#   deploy/ensure-rabbitmq-cluster.sh stop     stop them (their data stays for the next start)
#   deploy/ensure-rabbitmq-cluster.sh urls     the management URLs, one a line
#
# The nodes are extra nodes of deploy/rabbitmq-node.sh (never the main node of
# deploy/ensure-rabbitmq.sh, which other tests use): FLOW_CLUSTER_NODES lists them as
# NAME:INDEX (default flowc10:10 flowc11:11 flowc12:12), so node NAME@host listens on loopback
# for AMQP on 5700+INDEX, management on 15700+INDEX and distribution on 25700+INDEX. The
# first node is the seed; the others join it with `rabbitmqctl join_cluster`. They start in
# parallel: a clustered node that was not the last to stop waits for its peers at boot.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
node_sh="$here/rabbitmq-node.sh"
read -r -a nodes <<<"${FLOW_CLUSTER_NODES:-flowc10:10 flowc11:11 flowc12:12}"
host=$(hostname -s)
# The statistics settings of deploy/rabbitmq.conf (crossings reach /flow in ~1.5 s), and
# the partition handling RabbitMQ recommends for three nodes.
conf=(
  "collect_statistics_interval = 1000"
  "management.sample_retention_policies.global.minute = 1"
  "management.sample_retention_policies.basic.minute = 1"
  "management.sample_retention_policies.detailed.10 = 1"
  "cluster_partition_handling = pause_minority"
)

name_of() { echo "${1%%:*}"; }
index_of() { echo "${1##*:}"; }
ctl() { bash "$node_sh" ctl "$@"; }
seed=$(name_of "${nodes[0]}")

cluster_nodes() {  # $2 ("running_nodes" or "disk_nodes") as node $1 sees them, one a line
  ctl "$1" -q cluster_status --formatter json 2>/dev/null | python3 -c '
import json, sys
try:
    print("\n".join(json.load(sys.stdin).get(sys.argv[1], [])))
except ValueError:
    pass' "$2"
}

all_running() {
  local seen
  seen=$(cluster_nodes "$seed" running_nodes)
  for item in "${nodes[@]}"; do
    grep -qx "$(name_of "$item")@$host" <<<"$seen" || return 1
  done
}

start() {
  if ! command -v rabbitmq-server >/dev/null 2>&1 && [ ! -x /usr/sbin/rabbitmq-server ]; then
    bash "$here/ensure-rabbitmq.sh"  # installs the package (and its Erlang cookie)
  fi
  if all_running; then
    echo "rabbitmq-cluster: ${#nodes[@]} nodes running"
    return 0
  fi
  local pids=() item
  for item in "${nodes[@]}"; do
    bash "$node_sh" start "$(name_of "$item")" "$(index_of "$item")" "${conf[@]}" &
    pids+=($!)
  done
  local failed=no pid
  for pid in "${pids[@]}"; do wait "$pid" || failed=yes; done
  if [ "$failed" = yes ]; then
    echo "rabbitmq-cluster: a node did not start" >&2
    return 1
  fi
  for item in "${nodes[@]:1}"; do
    join "$(name_of "$item")"
  done
  for _ in $(seq 1 120); do
    if all_running; then
      echo "rabbitmq-cluster: ${#nodes[@]} nodes running"
      return 0
    fi
    sleep 0.5
  done
  echo "rabbitmq-cluster: the nodes run but are not all clustered" >&2
  return 1
}

join() {  # make node $1 a member of the seed's cluster (a no-op when it is one)
  local name=$1 members
  members=$(cluster_nodes "$name" disk_nodes)
  if grep -qx "$seed@$host" <<<"$members"; then
    return 0  # a member already (a restarted member may still be syncing: never reset it)
  fi
  echo "rabbitmq-cluster: joining $name@$host to $seed@$host"
  ctl "$name" -q stop_app
  ctl "$name" -q reset
  if ! ctl "$name" -q join_cluster "$seed@$host" 2>/dev/null; then
    # The seed still lists the node from an earlier life (its data was wiped): forget it.
    ctl "$seed" -q forget_cluster_node "$name@$host" || true
    ctl "$name" -q join_cluster "$seed@$host"
  fi
  ctl "$name" -q start_app
}

stop() {  # all at once: the next start starts them all at once too
  local item pids=()
  for item in "${nodes[@]}"; do
    bash "$node_sh" stop "$(name_of "$item")" &
    pids+=($!)
  done
  wait "${pids[@]}"
  echo "rabbitmq-cluster: stopped"
}

urls() {
  local item
  for item in "${nodes[@]}"; do
    echo "http://127.0.0.1:$((15700 + $(index_of "$item")))"
  done
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  urls) urls ;;
  *) echo "usage: ensure-rabbitmq-cluster.sh start|stop|urls" >&2; exit 2 ;;
esac
