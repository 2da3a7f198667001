#!/bin/bash
# console/test.sh [BUILD_DIR]
#
# The console's browser suites, in Debian's chromium (headless, --no-sandbox: this runs as
# root) driven by puppeteer-core from this directory's devDependencies:
#   tests/format.test.mjs the page's wording of sessions (Node alone);
#   tests/page.test.mjs  the page alone, against tests/mock-server.mjs (no daemon);
#   tests/e2e.test.mjs   the page, `ptyvisor web` and a real ptyvisord from BUILD_DIR.
# Also checks that assets/vendor/ is what package-lock.json gives (vendor.sh --check).
#
# For the end-to-end suite, tests/daemon.sh starts its own ptyvisord as root (the agent is the
# test account, a supervisor group and an observer group, recordings on); the suite runs
# `ptyvisor web` as `nobody` through setpriv, with the agent's group (to reach the socket) and
# one of those groups: as a supervisor, and as an observer. Run as root, from any directory.
# CONSOLE_SCREENSHOTS=DIR also saves screenshots of the real thing there.
# BUILD_DIR defaults to build/default of this repository.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="$(cd "${1:-$root/build/default}" && pwd)"
[ "$(id -u)" = 0 ] || { echo "console/test.sh: run as root (ptyvisord is a root daemon)" >&2; exit 2; }
for b in "$build/src/server/ptyvisord" "$build/src/cli/ptyvisor"; do
  [ -x "$b" ] || { echo "console/test.sh: $b is not built" >&2; exit 2; }
done
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || { echo "console/test.sh: no chromium (scripts/install-deps.sh installs it)" >&2; exit 2; }

cd "$here"
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
"$here/vendor.sh" --check

export CONSOLE_SCREENSHOTS="${CONSOLE_SCREENSHOTS:-}"
# A JUnit report too: node exits 0 over skipped tests, so a skip fails the run unless
# tests/skip-allowlist.txt allows it (tests/check-results.py).
reports=$(mktemp -d /tmp/ptyvisor-console-reports.XXXXXX)
trap 'rm -rf "$reports"' EXIT
status=0
"$here/tests/daemon.sh" "$build" -- node --test --test-concurrency=1 \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=junit --test-reporter-destination="$reports/node.xml" \
  tests/format.test.mjs tests/page.test.mjs tests/e2e.test.mjs || status=1
python3 "$root/tests/check-results.py" console "$reports/node.xml" || status=1
exit $status
