#!/usr/bin/env bash
# Create the project's virtualenv (.venv) and install the project into it: the client
# distribution (client/, flow-sidecar-client) and the server, both editable, in one pip run
# so that the server's dependency on the client is met from client/, never from an index.
# Usage: deploy/bootstrap.sh [EXTRAS]   e.g. deploy/bootstrap.sh test
# Idempotent: a second run only re-installs when a pyproject.toml changed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
extras=${1:-}
venv="$repo/.venv"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if [ ! -x "$venv/bin/python" ]; then
  if ! python3 -m venv "$venv" 2>/dev/null; then
    # Debian's python3 ships without ensurepip; python3-venv brings it.
    echo "bootstrap: installing python3-venv from Debian's packages"
    rm -rf "$venv"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$venv"
  fi
fi

spec="$repo"
[ -n "$extras" ] && spec="$repo[$extras]"
stamp="$venv/.installed-$(cat "$repo/pyproject.toml" "$repo/client/pyproject.toml" | cksum \
  | cut -d' ' -f1)-${extras:-base}"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: installing flow-sidecar${extras:+[$extras]} into .venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -e "$repo/client" -e "$spec"
  # A .venv from before the split: removing the old flow-sidecar took flow-config's script
  # with it, after the client had written it.
  if [ ! -x "$venv/bin/flow-config" ]; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
      --force-reinstall -e "$repo/client"
  fi
  touch "$stamp"
fi
