#!/bin/bash
# console/test.sh [BUILD_DIR]
#
# The console's browser suites, in Debian's chromium (headless, --no-sandbox: this runs as
# root) driven by puppeteer-core from this directory's devDependencies:
#   tests/page.test.mjs  the page alone, against tests/mock-server.mjs (no daemon);
#   tests/e2e.test.mjs   the page, `ptyvisor web` and a real ptyvisord from BUILD_DIR.
# Also checks that assets/vendor/ is what package-lock.json gives (vendor.sh --check).
#
# For the end-to-end suite this starts its own ptyvisord as root with a fresh configuration:
# the agent is the test account (scripts/ensure-test-account.sh), `supervisor_group` and
# `observer_group` are two groups made here, and recordings are on. The suite runs
# `ptyvisor web` as `nobody` through setpriv, with the agent's group (to reach the socket) and
# one of those groups: as a supervisor, and as an observer. Run as root, from any directory.
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

account=ptyvisor-test
supervisors=ptyvisor-console-sup
observers=ptyvisor-console-obs
"$root/scripts/ensure-test-account.sh" "$account"
for g in "$supervisors" "$observers"; do getent group "$g" >/dev/null || groupadd --system "$g" 2>/dev/null || getent group "$g" >/dev/null; done

run=$(mktemp -d /tmp/ptyvisor-console-test.XXXXXX)
chmod 0755 "$run"
install -m 0755 "$build/src/cli/ptyvisor" "$run/ptyvisor"
install -d -m 0700 "$run/recordings"
cat > "$run/ptyvisord.toml" <<TOML
user = "$account"
socket = "$run/ptyvisor.sock"
backend = "direct"
state_directory = "$run/state"
supervisor_group = "$supervisors"
observer_group = "$observers"

[recording]
directory = "$run/recordings"
TOML

daemon=
stop_daemon() {
  if [ -n "$daemon" ] && kill -TERM "$daemon" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$daemon" 2>/dev/null || true
  fi
  rm -rf "$run"
}
trap stop_daemon EXIT

# READY=1 through a notify socket bound before the daemon starts, so it cannot be missed.
daemon=$(python3 - "$run/notify" "$build/src/server/ptyvisord" --config "$run/ptyvisord.toml" <<'PY'
import os, socket, subprocess, sys
path, argv = sys.argv[1], sys.argv[2:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(30)
log = open(os.path.join(os.path.dirname(path), "ptyvisord.log"), "ab")
daemon = subprocess.Popen(argv, env=dict(os.environ, NOTIFY_SOCKET=path), stdout=log, stderr=log,
                          start_new_session=True)
while b"READY=1" not in s.recv(4096):
    pass
print(daemon.pid)
PY
)

export PTYVISOR_SOCKET="$run/ptyvisor.sock" PTYVISOR_BIN="$run/ptyvisor" PTYVISOR_RUN_DIR="$run"
export CONSOLE_AGENT="$account" CONSOLE_SUPERVISOR_GROUP="$supervisors" CONSOLE_OBSERVER_GROUP="$observers"
export CONSOLE_SCREENSHOTS="${CONSOLE_SCREENSHOTS:-}"
status=0
node --test --test-concurrency=1 --test-reporter=spec tests/page.test.mjs tests/e2e.test.mjs || status=$?
if [ "$status" != 0 ]; then
  echo "console/test.sh: the suite failed; the daemon's log:" >&2
  tail -n 50 "$run/ptyvisord.log" >&2 || true
fi
exit "$status"
