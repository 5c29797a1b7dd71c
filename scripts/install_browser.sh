#!/usr/bin/env bash
# Install Debian's headless browser for the report's page test (pytest marker `browser`).
# Idempotent: does nothing when chromium and chromedriver are already on PATH. Needs root (or sudo)
# and the Debian archive; exits non-zero with a message otherwise, and the browser tests then skip.
set -euo pipefail
have() { command -v "$1" >/dev/null 2>&1; }
if have chromium && have chromedriver; then
  echo "install_browser: chromium and chromedriver already present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if have sudo; then SUDO="sudo -n"; else
    echo "install_browser: not root and no sudo; install 'chromium chromium-driver' yourself" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver
have chromium && have chromedriver
echo "install_browser: installed $(chromium --version 2>/dev/null | head -1)"
