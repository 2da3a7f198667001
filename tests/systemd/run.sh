#!/bin/bash
# run.sh TEST_BINARY [gtest args...] - boot the test harness, run TEST_BINARY inside its
# namespaces as root, tear the harness down on every exit path, return the test's status.
# Unless the arguments ask for a --gtest_output of their own (the caller then checks it), or
# TEST_BINARY is a script, the run also fails when no test ran or a test was skipped that tests/skip-allowlist.txt does not
# allow in context ${PTYVISOR_SKIP_CONTEXT:-systemd} (tests/check-results.py): CTest sees only
# this script's status, not the skips inside.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
HARNESS="$HERE/../harness"
BIN=$(realpath "${1:?usage: run.sh TEST_BINARY [ARGS...]}")
shift

[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (it boots a private systemd)" >&2; exit 1; }
"$HERE/../../scripts/ensure-test-account.sh" ptyvisor-test || exit 1

# PTYVISOR_HARNESS_LAYOUT=hybrid: the harness with the host's cgroup v1 controllers
# (up-hybrid.sh), where systemd enforces MemoryMax=, TasksMax= and CPUQuota=.
UP="$HARNESS/up.sh" DOWN="$HARNESS/down.sh"
if [ "${PTYVISOR_HARNESS_LAYOUT:-}" = hybrid ]; then UP="$HERE/up-hybrid.sh" DOWN="$HERE/down-hybrid.sh"; fi
STATE=$(mktemp -d /tmp/ptyvisor-systemd-test.XXXXXX)
trap '"$DOWN" "$STATE/state"; rmdir "$STATE" 2>/dev/null' EXIT
trap 'exit 130' INT TERM

"$UP" "$STATE/state" >/dev/null || { echo "run.sh: harness did not come up" >&2; exit 1; }
set -a
. "$STATE/state/env"
set +a
report=
case " $* " in
    *" --gtest_output="*) ;;
    # A script (restart.sh runs itself in here) is no GoogleTest binary: it has no report.
    *) [ "$(head -c 2 "$BIN")" = '#!' ] || report="$STATE/report.json" ;;
esac
# shellcheck disable=SC2086  # HARNESS_EXEC is a command prefix
$HARNESS_EXEC "$BIN" "$@" ${report:+"--gtest_output=json:$report"}
rc=$?
if [ -n "$report" ]; then
    python3 "$HERE/../check-results.py" "${PTYVISOR_SKIP_CONTEXT:-systemd}" "$report" || { [ "$rc" != 0 ] || rc=1; }
    rm -f "$report"
fi
if [ "$rc" != 0 ] && [ -n "${HARNESS_PID:-}" ]; then
    echo "--- harness journal (last 80 lines) ---" >&2
    $HARNESS_EXEC journalctl --no-pager -n 80 2>/dev/null >&2 || true
fi
exit "$rc"
