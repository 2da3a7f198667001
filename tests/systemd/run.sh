#!/bin/bash
# run.sh TEST_BINARY [gtest args...] - boot the test harness, run TEST_BINARY inside its
# namespaces as root, tear the harness down on every exit path, return the test's status.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
HARNESS="$HERE/../harness"
BIN=$(realpath "${1:?usage: run.sh TEST_BINARY [ARGS...]}")
shift

[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (it boots a private systemd)" >&2; exit 1; }
"$HERE/../../scripts/ensure-test-account.sh" ptyvisor-test || exit 1

STATE=$(mktemp -d /tmp/ptyvisor-systemd-test.XXXXXX)
trap '"$HARNESS/down.sh" "$STATE/state"; rmdir "$STATE" 2>/dev/null' EXIT
trap 'exit 130' INT TERM

"$HARNESS/up.sh" "$STATE/state" >/dev/null || { echo "run.sh: harness did not come up" >&2; exit 1; }
set -a
. "$STATE/state/env"
set +a
# shellcheck disable=SC2086  # HARNESS_EXEC is a command prefix
$HARNESS_EXEC "$BIN" "$@"
rc=$?
if [ "$rc" != 0 ] && [ -n "${HARNESS_PID:-}" ]; then
    echo "--- harness journal (last 80 lines) ---" >&2
    $HARNESS_EXEC journalctl --no-pager -n 80 2>/dev/null >&2 || true
fi
exit "$rc"
