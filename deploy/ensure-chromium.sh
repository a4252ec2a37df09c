#!/usr/bin/env bash
# Make headless Chromium available for the dashboard test (tests/integration/test_dashboard.py).
#
# Installs Debian's `chromium` and `chromium-driver` when either is missing; does nothing
# otherwise. The test needs both: it starts `chromedriver` and speaks the W3C WebDriver
# protocol to it with plain HTTP requests (tests/utils/webdriver.py, no Selenium) to keep one
# headless Chromium page open while the dashboard updates live, and to screenshot it.
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
