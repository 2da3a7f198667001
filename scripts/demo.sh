#!/bin/bash
# The main job on a fresh machine: install dependencies, build, start ptyvisord with the
# embedded default backend (auto: systemd when it runs, direct otherwise), and open a
# session through the `ptyvisor` client as an unprivileged account. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "demo: run as root (ptyvisord is a root daemon)" >&2; exit 1; }

scripts/install-deps.sh
scripts/build.sh default
bin=build/default/src
account=ptyvisor-demo
scripts/ensure-test-account.sh "$account"

run=$(mktemp -d /tmp/ptyvisor-demo.XXXXXX)
chmod 0755 "$run"
cat > "$run/ptyvisord.toml" <<TOML
user = "$account"
socket = "$run/ptyvisor.sock"
backend = "auto"
state_directory = "$run/state"
TOML
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$run"' EXIT

# The daemon reports readiness through sd_notify; a tiny listener stands in for systemd.
export NOTIFY_SOCKET="$run/notify"
python3 - "$NOTIFY_SOCKET" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1]); s.settimeout(30)
while b"READY=1" not in s.recv(4096): pass
PY
waiter=$!
"$bin/server/ptyvisord" --config "$run/ptyvisord.toml" &
daemon=$!
wait $waiter
unset NOTIFY_SOCKET

echo "== ptyvisor run, as $account"
cd /tmp
status=0
runuser -u "$account" -- "$OLDPWD/$bin/cli/ptyvisor" run --socket "$run/ptyvisor.sock" -- \
  sh -c 'echo "hello from $(id -un) on $(tty), TERM=$TERM, size $(stty size)"; exit 3' </dev/null || status=$?
echo "== the session's exit status: $status (expected 3)"
[ "$status" = 3 ]
