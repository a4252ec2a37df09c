#!/usr/bin/env bash
# Make a RabbitMQ with the management plugin answer at FLOW_MANAGEMENT_URL.
#
# 1. If something already answers there with the configured credentials, use it as it is.
# 2. Otherwise, if the URL is on this machine: install this project's deploy/rabbitmq.conf
#    unless an operator's own config is there (restarting a node that runs with an older
#    version of ours so that it takes effect), install rabbitmq-server from
#    Debian's packages when it is missing, enable rabbitmq_management and
#    rabbitmq_prometheus (queue depths when statistics are off) and start the node
#    detached when none runs, then wait for the API.
# A broker on another host is never installed or touched: that is an error to report.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
url=${FLOW_MANAGEMENT_URL:-http://127.0.0.1:15672}
user=${FLOW_MANAGEMENT_USER:-guest}
pass=${FLOW_MANAGEMENT_PASSWORD:-guest}
export PATH="$PATH:/usr/sbin:/usr/lib/rabbitmq/bin"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

answers() {
  FLOW_U="$user" FLOW_P="$pass" python3 - "$url" <<'PY'
import base64, os, sys, urllib.request
req = urllib.request.Request(sys.argv[1].rstrip("/") + "/api/overview")
token = base64.b64encode(f"{os.environ['FLOW_U']}:{os.environ['FLOW_P']}".encode()).decode()
req.add_header("Authorization", "Basic " + token)
try:
    with urllib.request.urlopen(req, timeout=3) as resp:
        sys.exit(0 if resp.status == 200 else 1)
except Exception:
    sys.exit(1)
PY
}

if answers; then
  echo "rabbitmq: management API answers at $url"
  exit 0
fi

host=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).hostname or "")' "$url")
case "$host" in
  127.*|localhost|::1) ;;
  *) echo "rabbitmq: nothing answers at $url and it is not on this machine; start that broker first" >&2
     exit 1 ;;
esac

running() { command -v rabbitmqctl >/dev/null 2>&1 && as_root rabbitmqctl -q status >/dev/null 2>&1; }
was_running=no
if running; then was_running=yes; fi

# The config goes in first: on a machine with systemd, installing the package starts the
# node at once, and a node reads its config only when it starts. A config that is not this
# project's (an operator's broker) is never replaced: it is used as it is.
conf=/etc/rabbitmq/rabbitmq.conf
header=$(head -n 1 "$here/rabbitmq.conf")
changed=no
if as_root test -f "$conf" && [ "$(as_root head -n 1 "$conf")" != "$header" ]; then
  echo "rabbitmq: $conf is not flow-sidecar's; leaving it as it is (the statistics" \
       "settings in deploy/rabbitmq.conf make flow control react in ~1.5 s instead of 5-10 s)"
elif ! as_root cmp -s "$here/rabbitmq.conf" "$conf"; then
  as_root mkdir -p /etc/rabbitmq
  as_root install -m 0644 "$here/rabbitmq.conf" "$conf"
  echo "rabbitmq: installed deploy/rabbitmq.conf as $conf"
  changed=yes
fi

if ! command -v rabbitmq-server >/dev/null 2>&1; then
  echo "rabbitmq: not installed; installing rabbitmq-server from Debian's packages"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    -o Dpkg::Options::=--force-confold rabbitmq-server >/dev/null
fi

as_root rabbitmq-plugins -q --offline enable rabbitmq_management rabbitmq_prometheus >/dev/null
if [ "$was_running" = yes ] && [ "$changed" = yes ]; then
  echo "rabbitmq: restarting the node so that it reads $conf"
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active -q rabbitmq-server 2>/dev/null; then
    as_root systemctl restart rabbitmq-server
  else
    as_root rabbitmqctl -q shutdown >/dev/null  # waits until the node has exited
  fi
fi
if running; then
  # The node runs (started by the package, or restarted above) but the API does not
  # answer yet: make sure the plugin is on in the running node too.
  as_root rabbitmq-plugins -q enable rabbitmq_management rabbitmq_prometheus >/dev/null
else
  echo "rabbitmq: starting the node"
  as_root rabbitmq-server -detached
fi

# -detached returns before the node registers; the API answering is what counts.
for _ in $(seq 1 240); do
  if answers; then echo "rabbitmq: management API answers at $url"; exit 0; fi
  sleep 0.5
done
echo "rabbitmq: the node started but $url does not answer (credentials?)" >&2
exit 1
