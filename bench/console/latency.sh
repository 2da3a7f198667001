#!/bin/bash
# bench/console/latency.sh [BUILD_DIR] [-- latency.mjs options]
#
# Runs latency.mjs (the console's output latency in chromium, 16 terminals, one flooding)
# against its own ptyvisord from BUILD_DIR (default build/default), set up as for the
# console's tests (console/tests/daemon.sh). Installs the console's test tools first
# (npm ci in console/). Run as root.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build/default}"
[ $# -gt 0 ] && shift
[ "${1:-}" = -- ] && shift
(cd "$root/console" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
cd "$root"
exec "$root/console/tests/daemon.sh" "$build" -- node "$root/bench/console/latency.mjs" "$@"
