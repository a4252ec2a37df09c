#!/usr/bin/env bash
# Make a RabbitMQ with the management plugin answer at FLOW_MANAGEMENT_URL.
#
# 1. If something already answers there with the configured credentials, use it as it is.
# 2. Otherwise, if the URL is on this machine: install rabbitmq-server from Debian's packages
#    when it is missing, install this project's deploy/rabbitmq.conf, enable
#    rabbitmq_management and start the node detached, then wait for the API.
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

if ! command -v rabbitmq-server >/dev/null 2>&1; then
  echo "rabbitmq: not installed; installing rabbitmq-server from Debian's packages"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server >/dev/null
fi

conf=/etc/rabbitmq/rabbitmq.conf
if ! cmp -s "$here/rabbitmq.conf" "$conf" 2>/dev/null; then
  [ -f "$conf" ] && as_root cp "$conf" "$conf.before-flow-sidecar"
  as_root install -m 0644 "$here/rabbitmq.conf" "$conf"
  echo "rabbitmq: installed deploy/rabbitmq.conf as $conf"
fi

if as_root rabbitmqctl -q status >/dev/null 2>&1; then
  # The node runs but the API does not answer: the plugin is off.
  as_root rabbitmq-plugins -q enable rabbitmq_management >/dev/null
else
  as_root rabbitmq-plugins -q --offline enable rabbitmq_management >/dev/null
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
