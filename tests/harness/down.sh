#!/bin/bash
# down.sh - stop the harness started by up.sh and remove everything it left behind.
# Usage: down.sh STATE_DIR   (default /tmp/ptyvisor-harness/state)
# Only the PIDs up.sh recorded are signalled. When the namespace's PID 1 dies, the kernel
# kills every process in that PID namespace, and its mounts vanish with its mount namespace.
set -uo pipefail
S=$(realpath -m "${1:-/tmp/ptyvisor-harness/state}")
[ -d "$S" ] || exit 0

pid=$(cat "$S/pid" 2>/dev/null || true)
upid=$(cat "$S/unshare.pid" 2>/dev/null || true)
cg=$(cat "$S/cgroup" 2>/dev/null || true)

# alive = exists and is not a zombie (a dead unshare may linger as a zombie until whoever
# adopted it reaps it; that does not matter for cleanup)
alive() { [ -n "$1" ] && [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" != Z ]; }
# PID reuse guard: the recorded PID must still be a systemd binary.
case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in
    */systemd/systemd|*/systemd/systemd-shutdown) ;;
    *) pid="" ;;
esac

if alive "$pid"; then
    # SIGRTMIN+14 = immediate poweroff: systemd-shutdown kills the namespace's processes and
    # calls reboot(), which in a child PID namespace only ends that namespace.
    kill -s SIGRTMIN+14 "$pid" 2>/dev/null
    for _ in $(seq 100); do alive "$pid" || break; sleep 0.05; done   # <= 5 s
    alive "$pid" && kill -KILL "$pid" 2>/dev/null
fi
if alive "$upid" && [ "$(cat "/proc/$upid/comm" 2>/dev/null)" = unshare ]; then
    for _ in $(seq 40); do alive "$upid" || break; sleep 0.05; done
    alive "$upid" && kill -KILL "$upid" 2>/dev/null
fi

# Remove the (now empty) cgroup subtree, deepest first.
if [ -n "$cg" ] && [ -d "$cg" ]; then
    for _ in $(seq 50); do
        find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
        [ -d "$cg" ] || break; sleep 0.1
    done
    [ -d "$cg" ] && echo "down.sh: could not remove $cg" >&2
fi
rm -rf "$S"
exit 0
