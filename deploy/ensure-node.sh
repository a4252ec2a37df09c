#!/usr/bin/env bash
# The Node producer example (examples/node) runs on Node.js with amqplib from npm: use the
# node and npm on PATH, else install Debian's, then the example's packages exactly as its
# package-lock.json pins them (`npm ci`, again only when the lock changed).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "node: no node and npm on PATH; installing Debian's nodejs and npm"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
echo "node: $(node --version), npm $(npm --version)"
cd "$repo/examples/node"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
