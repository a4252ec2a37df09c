#!/usr/bin/env bash
# Make headless Chromium available for the dashboard test (tests/integration/test_dashboard.py).
#
# Installs Debian's `chromium` and `chromium-driver` when /usr/bin/chromium is missing; does
# nothing otherwise. The test drives the browser with --headless --dump-dom/--screenshot, so
# no Selenium is needed; chromium-driver is there for anyone who wants WebDriver later.
set -euo pipefail

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if [ -x /usr/bin/chromium ] && command -v chromedriver >/dev/null 2>&1; then
  echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo installed)"
  exit 0
fi

echo "chromium: not installed; installing chromium and chromium-driver from Debian's packages"
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  chromium chromium-driver fonts-dejavu-core >/dev/null
echo "chromium: $(/usr/bin/chromium --version)"
