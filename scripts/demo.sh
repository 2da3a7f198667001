#!/bin/bash
# The main job on a fresh machine: install dependencies, build the product (the daemon, its
# screen worker and the CLI; not the tests), start ptyvisord with the default backend (auto:
# systemd when it runs, direct otherwise), and, as an unprivileged account, run a command
# the way ssh -t does, then drive a detached session the way an agent does: wait for its
# prompt, type into it, wait for the answer, read its screen, list it, end it. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "demo: run as root (ptyvisord is a root daemon)" >&2; exit 1; }

scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target ptyvisord ptyvisor  # ptyvisord brings ptyvisor-screen
bin=build/default/src
account=ptyvisor-demo
scripts/ensure-test-account.sh "$account"

run=$(mktemp -d /tmp/ptyvisor-demo.XXXXXX)
chmod 0755 "$run"
# The client runs as the account, which may not reach this tree (a clone in /root is 0700):
# it runs a copy from the 0755 run directory. Only root runs ptyvisord, from the tree.
install -m 0755 "$bin/cli/ptyvisor" "$run/ptyvisor"
cat > "$run/ptyvisord.toml" <<TOML
user = "$account"
socket = "$run/ptyvisor.sock"
backend = "auto"
state_directory = "$run/state"
TOML
daemon=
stop_daemon() {
  if [ -n "$daemon" ] && kill -TERM "$daemon" 2>/dev/null; then
    for _ in $(seq 100); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$run"
}
trap stop_daemon EXIT

# The daemon reports readiness through sd_notify; a small listener stands in for systemd.
# It binds the notify socket first, then starts the daemon, so READY=1 cannot be missed.
daemon=$(python3 - "$run/notify" "$bin/server/ptyvisord" --config "$run/ptyvisord.toml" <<'PY'
import os, socket, subprocess, sys
path, argv = sys.argv[1], sys.argv[2:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(30)
daemon = subprocess.Popen(argv, env=dict(os.environ, NOTIFY_SOCKET=path), stdout=sys.stderr)
while b"READY=1" not in s.recv(4096):
    pass
print(daemon.pid)
PY
)

echo "== ptyvisor run, as $account"
cd /tmp
status=0
runuser -u "$account" -- "$run/ptyvisor" run --socket "$run/ptyvisor.sock" -- \
  sh -c 'echo "hello from $(id -un) on $(tty), TERM=$TERM, size $(stty size)"; exit 3' </dev/null || status=$?
echo "== the session's exit status: $status (expected 3)"
[ "$status" = 3 ]

# What an agent does: a session that outlives the command that started it, driven and read.
agent() { runuser -u "$account" -- "$run/ptyvisor" "$@"; }
export PTYVISOR_SOCKET=$run/ptyvisor.sock
echo "== ptyvisor run --detach -- python3 -q"
id=$(agent run --detach -- python3 -q)
echo "$id"
echo "== ptyvisor wait --for 'text:>>> ' $id; ptyvisor send --keys $id 'print(6 * 7)' Enter"
agent wait --timeout 10 --for 'text:>>> ' "$id"
agent send --keys "$id" 'print(6 * 7)' Enter
agent wait --timeout 10 --for 'text:42' "$id"
echo "== ptyvisor screen $id (the first lines)"
agent screen "$id" | head -n 3
echo "== ptyvisor ls"
agent ls
echo "== ptyvisor kill $id"
agent kill "$id"
