#!/bin/bash
# integrations/mcp/test.sh [--bench | --scenario] [BUILD_DIR]
#
# End-to-end tests of `ptyvisor mcp` with the official MCP TypeScript SDK against a real
# ptyvisord (scripts/with-daemon.sh). Installs the SDK (pinned in package.json) with npm into a
# fresh temp directory that the unprivileged test account can read, then runs `node --test`
# there as that account. BUILD_DIR defaults to build/default. Run as root, from anywhere.
# --bench runs bench.mjs instead: figures of tool-call latency and read throughput.
# --scenario runs scenario.mjs instead: two scripted agents' tool calls and bytes read.
set -euo pipefail
figures=
case "${1:-}" in
  --bench) figures=bench.mjs; shift ;;
  --scenario) figures=scenario.mjs; shift ;;
esac
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$root/build/default}" && pwd)"
[ "$(id -u)" = 0 ] || { echo "test.sh: run as root (it starts ptyvisord)" >&2; exit 2; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "test.sh: needs node and npm" >&2; exit 2; }

work=$(mktemp -d /tmp/ptyvisor-mcp-e2e.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "$here/package.json" "$here/mcp-config.json" "$here"/*.mjs "$work/"
# notify.test.mjs starts bash with the daemon's integration script, as START's shell_integration does.
mkdir "$work/shell-integration" && cp "$root/shell-integration/bash/ptyvisor.bash" "$work/shell-integration/"
(cd "$work" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
chmod -R a+rX "$work"
chmod 0755 "$work"

cd "$work"
if [ -n "$figures" ]; then
  "$root/scripts/with-daemon.sh" --build "$build" -- node "$work/$figures"
else
  # node --test exits 0 over skipped tests: its JUnit report is checked against
  # tests/skip-allowlist.txt (tests/check-results.py). The suite runs as the test account.
  "$root/scripts/ensure-test-account.sh"
  install -d -o ptyvisor-test -m 0755 "$work/reports"
  status=0
  "$root/scripts/with-daemon.sh" --build "$build" -- node --test --test-concurrency=1 \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=junit --test-reporter-destination="$work/reports/node.xml" "$work"/*.test.mjs || status=1
  python3 "$root/tests/check-results.py" mcp "$work/reports/node.xml" || status=1
  exit $status
fi
