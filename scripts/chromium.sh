#!/usr/bin/env bash
# scripts/chromium.sh [install] — installs Debian's chromium (the browser the console's tests drive with
# chromedp) when it is missing, and prints its path. The tests find it in $CHROMIUM or on PATH (chromium,
# chromium-browser); without it they skip, except under CI=true, where they fail.
set -euo pipefail
if [ -n "${CHROMIUM:-}" ] && [ -x "$CHROMIUM" ]; then
  echo "$CHROMIUM"
  exit 0
fi
for name in chromium chromium-browser; do
  if bin=$(command -v "$name"); then
    echo "$bin"
    exit 0
  fi
done
if [ "$(id -u)" -ne 0 ]; then
  echo "chromium.sh: chromium is missing and this is not root: install the Debian package chromium, or set CHROMIUM" >&2
  exit 1
fi
echo "installing chromium from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update >&2
apt-get install -y chromium >&2
command -v chromium
