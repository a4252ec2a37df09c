#!/usr/bin/env bash
# Extra RabbitMQ nodes on this machine, beside the main one of deploy/ensure-rabbitmq.sh,
# for tests that stop, hang, alarm or cluster a broker without touching the main node.
#
#   deploy/rabbitmq-node.sh start NAME INDEX [--prometheus] [CONF_LINE ...]
#                                                              idempotent; waits for the API
#   deploy/rabbitmq-node.sh stop NAME                          waits for the node to exit
#   deploy/rabbitmq-node.sh ctl NAME ARGS...                   rabbitmqctl against that node
#   deploy/rabbitmq-node.sh ports INDEX                "AMQP MANAGEMENT DIST PROMETHEUS"
#
# Node NAME@<short hostname>, all listeners on loopback: AMQP 5700+INDEX, management
# 15700+INDEX, distribution 25700+INDEX (INDEX 1..49); with --prometheus also the
# rabbitmq_prometheus plugin on 16700+INDEX (its /metrics and /metrics/detailed). Its files live under
# /var/lib/rabbitmq/flow-nodes/NAME, owned by the rabbitmq user, and it shares the main
# node's Erlang cookie, so it can join a cluster with other extra nodes. CONF_LINE items
# are added to its rabbitmq.conf (e.g. collect_statistics_interval=5000); a node whose
# config changed is restarted. Needs rabbitmq-server installed (deploy/ensure-rabbitmq.sh).
set -euo pipefail
export PATH="$PATH:/usr/sbin:/usr/lib/rabbitmq/bin"
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

cmd=${1:?usage: rabbitmq-node.sh start|stop|ctl|ports ...}
shift
host=$(hostname -s)

ports() { echo "$((5700 + $1)) $((15700 + $1)) $((25700 + $1)) $((16700 + $1))"; }

node_env() {  # the environment every command for node $1 runs with
  local dir=/var/lib/rabbitmq/flow-nodes/$1
  echo HOME=/var/lib/rabbitmq RABBITMQ_NODENAME="$1@$host" \
    RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" \
    RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf" RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
    RABBITMQ_PID_FILE="$dir/pid" RABBITMQ_ADVANCED_CONFIG_FILE="$dir/advanced.config"
}

ctl() {  # rabbitmqctl as the rabbitmq user against node $1
  local name=$1; shift
  # shellcheck disable=SC2046
  as_root env $(node_env "$name") runuser -u rabbitmq -- rabbitmqctl -n "$name@$host" "$@"
}

answers() {  # the node's management API answers
  python3 - "$1" <<'PY'
import base64, sys, urllib.request
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/api/overview")
req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
try:
    with urllib.request.urlopen(req, timeout=3) as resp:
        sys.exit(0 if resp.status == 200 else 1)
except Exception:
    sys.exit(1)
PY
}

case "$cmd" in
  ports) ports "${1:?INDEX}" ;;
  ctl) ctl "$@" ;;
  stop)
    name=${1:?NAME}
    ctl "$name" -q shutdown >/dev/null 2>&1 || true ;;
  start)
    name=${1:?NAME}; index=${2:?INDEX}; shift 2
    read -r amqp mgmt dist prom < <(ports "$index")
    dir=/var/lib/rabbitmq/flow-nodes/$name
    as_root mkdir -p "$dir/mnesia" "$dir/log"
    plugins=rabbitmq_management
    extra=()
    if [ "${1:-}" = --prometheus ]; then
      shift
      plugins="rabbitmq_management,rabbitmq_prometheus"
      extra=("prometheus.tcp.ip = 127.0.0.1" "prometheus.tcp.port = $prom")
    fi
    conf=$(printf '%s\n' "# flow-sidecar test node $name" \
      "listeners.tcp.default = 127.0.0.1:$amqp" "management.tcp.ip = 127.0.0.1" \
      "management.tcp.port = $mgmt" "loopback_users = none" "${extra[@]}" "$@")
    changed=no
    if [ "$(as_root cat "$dir/rabbitmq.conf" 2>/dev/null || true)" != "$conf" ]; then
      printf '%s\n' "$conf" | as_root tee "$dir/rabbitmq.conf" >/dev/null
      changed=yes
    fi
    if [ "$(as_root cat "$dir/enabled_plugins" 2>/dev/null || true)" != "[$plugins]." ]; then
      echo "[$plugins]." | as_root tee "$dir/enabled_plugins" >/dev/null
      changed=yes
    fi
    echo '[].' | as_root tee "$dir/advanced.config" >/dev/null
    as_root chown -R rabbitmq:rabbitmq /var/lib/rabbitmq/flow-nodes
    if ctl "$name" -q status >/dev/null 2>&1; then
      if [ "$changed" = no ] && answers "$mgmt"; then exit 0; fi
      [ "$changed" = yes ] && ctl "$name" -q shutdown >/dev/null 2>&1 || true
    fi
    boot() {  # start the node detached
      as_root rm -f "$dir/pid"
      # shellcheck disable=SC2046
      as_root env $(node_env "$name") RABBITMQ_DIST_PORT="$dist" \
        runuser -u rabbitmq -- rabbitmq-server -detached
    }
    running() {  # a VM of this node runs (its environment names it; a failed boot
      # removes the pid file, so the pid file cannot tell)
      local proc
      for proc in /proc/[0-9]*; do
        [ "$(cat "$proc/comm" 2>/dev/null)" = beam.smp ] || continue
        as_root cat "$proc/environ" 2>/dev/null | tr '\0' '\n' \
          | grep -qx "RABBITMQ_NODENAME=$name@$host" && return 0
      done
      return 1
    }
    if ! ctl "$name" -q status >/dev/null 2>&1; then boot; fi
    # A clustered node booting beside its peers can fail their feature-flag sync while
    # they boot too (3.10: incompatible_feature_flags, badmap undefined), and its peers
    # then wait for its tables; a second boot finds them up. Three boots, 120 s in all.
    boots=1 gone=0
    for _ in $(seq 1 240); do
      if answers "$mgmt"; then exit 0; fi
      if running; then gone=0; else gone=$((gone + 1)); fi
      if [ "$gone" -ge 2 ] && [ "$boots" -lt 3 ]; then  # gone for two looks: not starting
        echo "rabbitmq-node: $name stopped while booting; booting it again" >&2
        boots=$((boots + 1)) gone=0
        boot
      fi
      sleep 0.5
    done
    echo "rabbitmq-node: $name did not answer on 127.0.0.1:$mgmt" >&2
    exit 1 ;;
  *) echo "rabbitmq-node.sh: unknown command $cmd" >&2; exit 2 ;;
esac
