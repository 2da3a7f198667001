#!/bin/bash
# with-daemon.sh [--build DIR] [--config-extra FILE] [--user NAME] -- CMD [ARG...]
#
# Runs CMD as the unprivileged test account against a real ptyvisord, the way the agent
# would meet it: the daemon (from DIR, default build/default) runs as root with a fresh
# configuration whose `user` is the account; CMD runs as the account with
#   PTYVISOR_SOCKET  the daemon's socket
#   PTYVISOR_BIN     a copy of the `ptyvisor` CLI the account can execute
#   PTYVISOR_RUN_DIR a 0755 directory the account can read (the CLI and the socket live there)
# and the caller's working directory if the account can enter it, else that directory.
# The suites of clients/ and integrations/ use it. Exits with CMD's status; the daemon is
# stopped (SIGTERM, then SIGKILL after 10 s) whatever happens. Run as root.
#
# --config-extra FILE appends FILE (TOML: top-level keys first, then tables) to the daemon's
# configuration, for a suite that needs e.g. a shorter retention.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build/default"
extra=
account=ptyvisor-test
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(cd "$2" && pwd)"; shift 2 ;;
    --config-extra) extra="$2"; shift 2 ;;
    --user) account="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "with-daemon.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--build DIR] [--config-extra FILE] -- CMD [ARG...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "with-daemon.sh: run as root (ptyvisord is a root daemon)" >&2; exit 2; }
for b in "$build/src/server/ptyvisord" "$build/src/cli/ptyvisor"; do
  [ -x "$b" ] || { echo "with-daemon.sh: $b is not built" >&2; exit 2; }
done
"$root/scripts/ensure-test-account.sh" "$account"

run=$(mktemp -d /tmp/ptyvisor-with-daemon.XXXXXX)
chmod 0755 "$run"
install -m 0755 "$build/src/cli/ptyvisor" "$run/ptyvisor"
cat > "$run/ptyvisord.toml" <<TOML
user = "$account"
socket = "$run/ptyvisor.sock"
backend = "direct"
state_directory = "$run/state"
TOML
if [ -n "$extra" ]; then cat "$extra" >> "$run/ptyvisord.toml"; fi

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

dir=$PWD
runuser -u "$account" -- test -x "$dir" 2>/dev/null || dir=$run
status=0
(cd "$dir" && runuser -u "$account" -- env PTYVISOR_SOCKET="$run/ptyvisor.sock" \
   PTYVISOR_BIN="$run/ptyvisor" PTYVISOR_RUN_DIR="$run" HOME="$(getent passwd "$account" | cut -d: -f6)" \
   "$@") || status=$?
if [ "$status" != 0 ]; then
  echo "with-daemon.sh: '$*' exited with $status; the daemon's log:" >&2
  tail -n 50 "$run/ptyvisord.log" >&2 || true
fi
exit "$status"
