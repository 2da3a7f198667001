#!/bin/bash
# up-hybrid.sh STATE_DIR - the harness (tests/harness/up.sh) with the cgroup layout of a host
# that mounts cgroup v1 controllers beside a v2 hierarchy ("hybrid", as this build machine
# does), so that systemd inside it manages the v1 memory, pids, cpu and cpuacct controllers
# and MemoryMax=, TasksMax= and CPUQuota= are enforced. tests/harness/up.sh mounts a pure
# cgroup2 hierarchy instead, whose controllers on such a host are all bound to v1: systemd
# there accepts those properties and enforces none of them.
#
# Each v1 hierarchy gets a cgroup of its own for the harness (recorded in STATE_DIR/cgroups-v1,
# removed by down-hybrid.sh); the namespace's PID 1 enters them before `unshare --cgroup`, so
# they are the roots that systemd sees. Same outputs as up.sh (STATE_DIR/env).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
S=$(realpath -m "${1:?usage: up-hybrid.sh STATE_DIR}")
TIMEOUT=${HARNESS_TIMEOUT:-20}
NAME=ptyvisor-harness-$(echo -n "$S" | md5sum | cut -c1-8)

die() { echo "up-hybrid.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root"
[ "$(stat -fc %T /sys/fs/cgroup)" = tmpfs ] || die "/sys/fs/cgroup is not a v1/hybrid layout"
V1=
for c in memory pids cpu cpuacct systemd; do
    [ "$(stat -fc %T "/sys/fs/cgroup/$c" 2>/dev/null)" = cgroupfs ] || die "no v1 hierarchy at /sys/fs/cgroup/$c"
    V1="$V1 /sys/fs/cgroup/$c/$NAME"
done
[ "$(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ] || die "no cgroup2 at /sys/fs/cgroup/unified"
CG2=/sys/fs/cgroup/unified/$NAME
SYSTEMD=/lib/systemd/systemd; [ -x "$SYSTEMD" ] || SYSTEMD=/usr/lib/systemd/systemd
UNITDIR=/lib/systemd/system; [ -e "$UNITDIR/dbus.service" ] || UNITDIR=/usr/lib/systemd/system

rm -rf "$S"
mkdir -p "$S/run" "$S/units" "$S/empty"
: > "$S/manager.log"
units="dbus.socket dbus.service systemd-journald.socket systemd-journald.service"
printf '[Unit]\nDescription=ptyvisor test harness (hybrid)\nWants=%s\n' "$units" > "$S/units/harness.target"
for t in sysinit basic sockets shutdown; do
    printf '[Unit]\nDescription=%s.target (harness stub)\nDefaultDependencies=no\n' "$t" > "$S/units/$t.target"
done
for u in $units; do ln -s "$UNITDIR/$u" "$S/units/$u"; done
mkdir -p "$S/run/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\nReadKMsg=no\nRuntimeMaxUse=64M\n' > "$S/run/systemd/journald.conf.d/harness.conf"

# shellcheck disable=SC2086
mkdir -p $V1 "$CG2"
echo "$V1 $CG2" > "$S/cgroups-v1"
echo "$CG2" > "$S/cgroup"
# memory v1: the limit of a child counts its children (use_hierarchy is 1 on such hosts).

INNER='
set -eu
S=$1 NAME=$2 SYSTEMD=$3
for c in memory pids cpu cpuacct systemd unified; do echo 1 > /sys/fs/cgroup/$c/$NAME/cgroup.procs; done
mount -n --bind "$S/run" /run
mount -n --bind "$S/manager.log" /dev/kmsg
mount -n --bind /dev/null /dev/console
exec unshare --cgroup sh -c "
  umount -n -R /sys/fs/cgroup
  mount -n -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
  for c in memory pids cpu cpuacct; do mkdir /sys/fs/cgroup/\$c; mount -n -t cgroup -o \$c cgroup /sys/fs/cgroup/\$c; done
  mkdir /sys/fs/cgroup/systemd /sys/fs/cgroup/unified
  mount -n -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
  mount -n -t cgroup2 cgroup2 /sys/fs/cgroup/unified
  mount -n -o remount,bind,ro /sys 2>/dev/null || true
  exec \"\$@\"" sh \
  env -i container=ptyvisor-harness PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    SYSTEMD_UNIT_PATH="/run/systemd/system.control:/run/systemd/transient:$S/units" \
    SYSTEMD_GENERATOR_PATH="$S/empty" SYSTEMD_ENVIRONMENT_GENERATOR_PATH="$S/empty" \
    "$SYSTEMD" --unit=harness.target --log-target=journal-or-kmsg --log-level=info --show-status=no
'
setsid unshare --pid --fork --kill-child --mount --uts --ipc --propagation private --mount-proc \
    bash -c "$INNER" inner "$S" "$NAME" "$SYSTEMD" >"$S/unshare.log" 2>&1 </dev/null &
upid=$!
echo "$upid" > "$S/unshare.pid"
pid=
for _ in $(seq 250); do
    pid=$(awk '{print $1}' "/proc/$upid/task/$upid/children" 2>/dev/null) || true
    [ -n "${pid:-}" ] && break; sleep 0.02
done
[ -n "${pid:-}" ] || { cat "$S/unshare.log" >&2; die "unshare failed"; }
echo "$pid" > "$S/pid"
export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$S/run/dbus/system_bus_socket"
deadline=$(( $(date +%s) + TIMEOUT ))
until [ "$(busctl --system get-property org.freedesktop.systemd1 /org/freedesktop/systemd1 \
            org.freedesktop.systemd1.Manager SystemState 2>/dev/null)" = 's "running"' ]; do
    if [ "$(date +%s)" -ge "$deadline" ] || ! kill -0 "$pid" 2>/dev/null; then
        cat "$S/unshare.log" "$S/manager.log" >&2
        kill -KILL "$pid" 2>/dev/null || true
        die "harness did not become ready; run down-hybrid.sh $S"
    fi
    sleep 0.02
done
cat > "$S/env" <<ENV
HARNESS_STATE=$S
HARNESS_PID=$pid
HARNESS_CGROUP=$CG2
HARNESS_CGROUP_LAYOUT=hybrid
DBUS_SYSTEM_BUS_ADDRESS=unix:path=$S/run/dbus/system_bus_socket
HARNESS_EXEC="nsenter --target $pid --mount --pid --uts --ipc --cgroup --wd=. --"
ENV
cat "$S/env"
