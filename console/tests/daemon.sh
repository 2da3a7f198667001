#!/bin/bash
# console/tests/daemon.sh BUILD_DIR -- CMD [ARG...]
#
# Runs CMD (as root, in the caller's directory) against a fresh ptyvisord from BUILD_DIR set up
# for the console: the agent is the test account (scripts/ensure-test-account.sh), members of
# ptyvisor-console-sup are supervisors (`supervisor_group`), members of ptyvisor-console-obs
# observers (`observer_group`), both groups made here if missing, and every session is
# recorded. CMD gets, as tests/harness.mjs reads them:
#   PTYVISOR_SOCKET, PTYVISOR_BIN (a CLI anyone may execute), PTYVISOR_RUN_DIR,
#   CONSOLE_AGENT, CONSOLE_SUPERVISOR_GROUP, CONSOLE_OBSERVER_GROUP.
# Used by console/test.sh and bench/console/latency.sh. Exits with CMD's status; the daemon
# is stopped (SIGTERM, then SIGKILL after 10 s) whatever happens. Run as root.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "$1" && pwd)"
shift
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || { echo "usage: $0 BUILD_DIR -- CMD [ARG...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "daemon.sh: run as root (ptyvisord is a root daemon)" >&2; exit 2; }

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
) || { echo "daemon.sh: ptyvisord did not become ready; its log:" >&2; cat "$run/ptyvisord.log" >&2; exit 1; }

export PTYVISOR_SOCKET="$run/ptyvisor.sock" PTYVISOR_BIN="$run/ptyvisor" PTYVISOR_RUN_DIR="$run"
export CONSOLE_AGENT="$account" CONSOLE_SUPERVISOR_GROUP="$supervisors" CONSOLE_OBSERVER_GROUP="$observers"
status=0
"$@" || status=$?
if [ "$status" != 0 ]; then
  echo "daemon.sh: '$*' exited with $status; the daemon's log:" >&2
  tail -n 50 "$run/ptyvisord.log" >&2 || true
fi
exit "$status"
