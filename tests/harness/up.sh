#!/bin/bash
# up.sh - boot a private, throw-away systemd as PID 1 of new pid, mount, uts, ipc and cgroup
# namespaces, for the systemd backend's tests. Works on a host whose PID 1 is not systemd
# (containers, build machines) and on one whose PID 1 is: nothing is mounted in the host's
# mount namespace and the host's systemd is never contacted.
#
# Usage:  up.sh STATE_DIR              (default /tmp/ptyvisor-harness/state)
#   HARNESS_JOURNAL=0   skip systemd-journald (manager log then stays in STATE_DIR/manager.log)
#   HARNESS_TIMEOUT=20  seconds to wait for readiness
# Prints shell assignments, also saved in STATE_DIR/env (source it):
#   HARNESS_STATE, HARNESS_PID (host PID of the namespaced systemd), HARNESS_CGROUP,
#   DBUS_SYSTEM_BUS_ADDRESS (the harness' system bus, reachable from the host too),
#   HARNESS_EXEC (prefix that runs a command inside the namespaces, keeping cwd and env).
# Anything that deals in PIDs (MainPID, pidfds, /proc/PID/cgroup) must run via HARNESS_EXEC.
# Needs: root, util-linux (unshare, nsenter), systemd, dbus (dbus-daemon), busctl.
set -euo pipefail

S=$(realpath -m "${1:-/tmp/ptyvisor-harness/state}")
TIMEOUT=${HARNESS_TIMEOUT:-20}
JOURNAL=${HARNESS_JOURNAL:-1}
CG_NAME=${HARNESS_CGROUP_NAME:-ptyvisor-harness-$(echo -n "$S" | md5sum | cut -c1-8)}

die() { echo "up.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root"
for tool in unshare nsenter busctl setsid md5sum; do
    command -v "$tool" >/dev/null || die "missing tool: $tool"
done
SYSTEMD=
for c in /lib/systemd/systemd /usr/lib/systemd/systemd; do
    [ -x "$c" ] && { SYSTEMD=$c; break; }
done
[ -n "$SYSTEMD" ] || die "systemd is not installed (no /lib/systemd/systemd)"
UNITDIR=
for d in /lib/systemd/system /usr/lib/systemd/system; do
    [ -e "$d/dbus.service" ] && { UNITDIR=$d; break; }
done
[ -n "$UNITDIR" ] || die "dbus is not installed (no dbus.service unit); apt-get install dbus"
if [ -e "$S/pid" ] && kill -0 "$(cat "$S/pid")" 2>/dev/null; then
    die "harness already running in $S (pid $(cat "$S/pid")); run down.sh first"
fi

# The cgroup2 hierarchy on the host: pure unified, or hybrid (v2 at /sys/fs/cgroup/unified).
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then CG_ROOT=/sys/fs/cgroup
elif [ "$(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then CG_ROOT=/sys/fs/cgroup/unified
else die "no cgroup2 hierarchy mounted on the host"; fi
CG="$CG_ROOT/$CG_NAME"

rm -rf "$S"
mkdir -p "$S/run" "$S/units" "$S/empty"
: > "$S/manager.log"

# A minimal unit set. SYSTEMD_UNIT_PATH replaces the search path completely, so none of the
# host's units exist in the harness. It must still name /run/systemd/transient (and
# system.control): without it a daemon-reexec reloads every transient unit as "not-found". Transient services have DefaultDependencies=yes and so
# need sysinit.target, basic.target and shutdown.target: stubs.
units="dbus.socket dbus.service"
[ "$JOURNAL" = 1 ] && [ -e "$UNITDIR/systemd-journald.service" ] && \
    units="$units systemd-journald.socket systemd-journald.service"
printf '[Unit]\nDescription=ptyvisor test harness\nWants=%s\n' "$units" > "$S/units/harness.target"
for t in sysinit basic sockets shutdown; do
    printf '[Unit]\nDescription=%s.target (harness stub)\nDefaultDependencies=no\n' "$t" > "$S/units/$t.target"
done
for u in $units; do ln -s "$UNITDIR/$u" "$S/units/$u"; done
# journald keeps everything in the harness' /run and never touches /var/log/journal.
mkdir -p "$S/run/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\nReadKMsg=no\nRuntimeMaxUse=64M\n' > "$S/run/systemd/journald.conf.d/harness.conf"

mkdir -p "$CG"

# Runs as PID 1 of the new pid+mount namespaces (host mounts still visible, all private).
# -n everywhere: libmount must not write /run/mount/utab on the host before /run is bound.
INNER='
set -eu
S=$1 CG=$2 SYSTEMD=$3
echo 1 > "$CG/cgroup.procs"                      # enter our cgroup (host path still mounted)
mount -n --bind "$S/run" /run                    # our /run: sockets appear in $S/run on the host
mount -n --bind "$S/manager.log" /dev/kmsg       # early manager log (before journald) -> file
mount -n --bind /dev/null /dev/console           # never write to the host console
umount -n -R /sys/fs/cgroup 2>/dev/null || true  # hide the host cgroup mounts ...
mount -n -o remount,bind,ro /sys 2>/dev/null || true
exec unshare --cgroup sh -c "mount -n -t cgroup2 cgroup2 /sys/fs/cgroup && exec \"\$@\"" sh \
  env -i container=ptyvisor-harness PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    SYSTEMD_UNIT_PATH="/run/systemd/system.control:/run/systemd/transient:$S/units" \
    SYSTEMD_GENERATOR_PATH="$S/empty" SYSTEMD_ENVIRONMENT_GENERATOR_PATH="$S/empty" \
    "$SYSTEMD" --unit=harness.target --log-target=journal-or-kmsg --log-level=info --show-status=no
'

t0=$(date +%s%N)
# --kill-child: the whole namespace dies with the unshare process.
setsid unshare --pid --fork --kill-child --mount --uts --ipc --propagation private --mount-proc \
    bash -c "$INNER" inner "$S" "$CG" "$SYSTEMD" >"$S/unshare.log" 2>&1 </dev/null &
upid=$!
echo "$upid" > "$S/unshare.pid"
echo "$CG" > "$S/cgroup"

# The host PID of the namespace's PID 1 is unshare's only child.
pid=
for _ in $(seq 250); do
    pid=$(awk '{print $1}' "/proc/$upid/task/$upid/children" 2>/dev/null) || true
    [ -n "${pid:-}" ] && break; sleep 0.02
done
[ -n "${pid:-}" ] || { echo "up.sh: unshare failed:" >&2; cat "$S/unshare.log" >&2; exit 1; }
echo "$pid" > "$S/pid"

export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$S/run/dbus/system_bus_socket"
deadline=$(( $(date +%s) + TIMEOUT ))
until [ "$(busctl --system get-property org.freedesktop.systemd1 /org/freedesktop/systemd1 \
            org.freedesktop.systemd1.Manager SystemState 2>/dev/null)" = 's "running"' ]; do
    if [ "$(date +%s)" -ge "$deadline" ] || ! kill -0 "$pid" 2>/dev/null; then
        echo "up.sh: harness did not become ready; logs:" >&2
        cat "$S/unshare.log" "$S/manager.log" >&2
        nsenter -t "$pid" -m -p systemctl --no-pager --failed >&2 2>/dev/null || true
        kill -KILL "$pid" 2>/dev/null || true     # state kept for inspection; run down.sh
        exit 1
    fi
    sleep 0.02
done
t1=$(date +%s%N)

cat > "$S/env" <<ENV
HARNESS_STATE=$S
HARNESS_PID=$pid
HARNESS_CGROUP=$CG
DBUS_SYSTEM_BUS_ADDRESS=unix:path=$S/run/dbus/system_bus_socket
HARNESS_EXEC="nsenter --target $pid --mount --pid --uts --ipc --cgroup --wd=. --"
ENV
cat "$S/env"
echo "# harness ready in $(( (t1 - t0) / 1000000 )) ms" >&2
