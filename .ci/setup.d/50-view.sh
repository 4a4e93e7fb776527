#!/usr/bin/env bash
# The viewer's browser tests (plugins/view/tests) drive Debian's Chromium through chromedriver.
# Idempotent and quiet; fails loudly when the packages cannot be installed.
set -euo pipefail
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi
chromium --version >/dev/null 2>&1 || { echo "50-view.sh: chromium does not start" >&2; exit 1; }
chromedriver --version >/dev/null
