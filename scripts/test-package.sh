#!/bin/bash
# test-package.sh [BUILD_DIR] - build the Debian package, install it on this machine, check
# what it installed, run the installed daemon under the installed units inside a private
# systemd (tests/harness), open a session through it, then remove the package.
#
# Run as root, after the build (default BUILD_DIR: build/default, the default preset), whose
# top-level CMakeLists.txt includes cmake/Packaging.cmake. CI runs it on a throw-away machine:
# it installs and purges the package `ptyvisor` and creates the test account.
#   PTYVISOR_TEST_ACCOUNT   the account sessions run as (default ptyvisor-test)
#   PACKAGE_TEST_BACKEND    the backend the daemon runs with in the harness (default systemd)
#   PACKAGE_TEST_MAX_EXPOSURE  highest acceptable `systemd-analyze security` score (default 2.0)
# Every check prints "ok" or "FAIL"; the last line is "package: N passed, M failed", and the
# exit status is 0 only when nothing failed.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(realpath -m "${1:-$ROOT/build/default}")
ACCOUNT=${PTYVISOR_TEST_ACCOUNT:-ptyvisor-test}
BACKEND=${PACKAGE_TEST_BACKEND:-systemd}
MAX_EXPOSURE=${PACKAGE_TEST_MAX_EXPOSURE:-2.0}
SOCKET=/run/ptyvisor/ptyvisor.sock          # as in ptyvisord.socket, inside the harness
UNITS=(ptyvisord.service ptyvisord.socket)
UNIT_DIR=/lib/systemd/system
MANPAGES=(/usr/share/man/man1/ptyvisor.1 /usr/share/man/man5/ptyvisord.toml.5 /usr/share/man/man8/ptyvisord.8)

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   - $1"; }
bad() { failed=$((failed + 1)); echo "FAIL - $1"; [ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/       /'; return 0; }
# check NAME CMD...: passes when CMD exits 0; its output is shown on failure.
check() {
    local name=$1 out
    shift
    if out=$("$@" 2>&1); then ok "$name"; else bad "$name" "$out"; fi
}
finish() {
    echo "package: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
}

[ "$(id -u)" = 0 ] || { echo "test-package.sh: must run as root" >&2; exit 2; }
for tool in cmake cpack dpkg dpkg-deb groff systemd-analyze systemd-tmpfiles runuser; do
    command -v "$tool" >/dev/null || { echo "test-package.sh: missing tool: $tool" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/ptyvisor-package.XXXXXX)
HARNESS_DIR=$WORK/harness
installed_by_us=0
cleanup() {
    [ -e "$HARNESS_DIR/pid" ] && "$ROOT/tests/harness/down.sh" "$HARNESS_DIR" >/dev/null 2>&1
    if [ "$installed_by_us" = 1 ] && dpkg-query -W ptyvisor >/dev/null 2>&1; then
        dpkg -P ptyvisor >/dev/null 2>&1
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 1. build the package ----------------------------------------------------------------
if [ ! -f "$BUILD/CPackConfig.cmake" ]; then
    bad "package configured" "$BUILD/CPackConfig.cmake is missing: add include(cmake/Packaging.cmake) to CMakeLists.txt and configure $BUILD"
    finish
fi
if out=$(cmake --build "$BUILD" --target package 2>&1); then
    ok "cmake --build $BUILD --target package"
else
    bad "cmake --build $BUILD --target package" "$(tail -n 30 <<<"$out")"
    finish
fi
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$BUILD/CPackConfig.cmake")
deb=$(ls -t "$BUILD"/ptyvisor_"$version"_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || { bad "package file ptyvisor_${version}_*.deb in $BUILD"; finish; }
echo "#    $deb"

control=$(dpkg-deb -f "$deb" Package Depends)
if grep -q '^Package: ptyvisor$' <<<"$control" && grep -q 'libsystemd0' <<<"$control"; then
    ok "control: package ptyvisor, depends on libsystemd0"
else
    bad "control: package ptyvisor, depends on libsystemd0" "$control"
fi
contents=$(dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's#^\./#/#')
missing=
for f in /usr/sbin/ptyvisord /usr/bin/ptyvisor $UNIT_DIR/ptyvisord.service $UNIT_DIR/ptyvisord.socket \
         /usr/lib/tmpfiles.d/ptyvisor.conf /etc/ptyvisor/ptyvisord.toml \
         /usr/share/doc/ptyvisor/examples/ptyvisord.toml "${MANPAGES[@]}" \
         /usr/share/ptyvisor/shell-integration/bash/ptyvisor.bash /usr/share/ptyvisor/shell-integration/zsh/.zshrc; do
    grep -qx -- "$f" <<<"$contents" || missing="$missing $f"
done
if [ -z "$missing" ]; then ok "package holds binaries, units, tmpfiles, config, man pages"
else bad "package holds binaries, units, tmpfiles, config, man pages" "missing:$missing"; fi

# --- 2. install it -------------------------------------------------------------------------
if dpkg-query -W -f='${Status}' ptyvisor 2>/dev/null | grep -q 'installed'; then
    echo "#    note: ptyvisor was already installed; this run replaces it and purges it at the end"
fi
if out=$(dpkg -i "$deb" 2>&1); then
    installed_by_us=1
    ok "dpkg -i $(basename "$deb")"
else
    installed_by_us=1
    bad "dpkg -i $(basename "$deb")" "$out"
    finish
fi
check "ptyvisord --version" /usr/sbin/ptyvisord --version
check "ptyvisor --version" /usr/bin/ptyvisor --version
conffiles=$(dpkg-query -W -f='${Conffiles}' ptyvisor)
if grep -q '/etc/ptyvisor/ptyvisord.toml' <<<"$conffiles"; then ok "/etc/ptyvisor/ptyvisord.toml is a conffile"
else bad "/etc/ptyvisor/ptyvisord.toml is a conffile" "conffiles: $conffiles"; fi
# postinst ran systemd-tmpfiles for the tmpfiles.d entry.
modes="$(stat -c '%n %a %U:%G' /run/ptyvisor 2>&1)"
if [ "$modes" = "/run/ptyvisor 755 root:root" ]; then
    ok "tmpfiles.d: /run/ptyvisor 0755"
else
    bad "tmpfiles.d: /run/ptyvisor 0755" "$modes"
fi

# --- 3. configuration -------------------------------------------------------------------------
"$ROOT/scripts/ensure-test-account.sh" "$ACCOUNT"
check "ptyvisord --check-config (installed config, --user $ACCOUNT)" \
    /usr/sbin/ptyvisord --check-config --config /etc/ptyvisor/ptyvisord.toml --user "$ACCOUNT"
check "ptyvisord --check-config (example config, --user $ACCOUNT)" \
    /usr/sbin/ptyvisord --check-config --config /usr/share/doc/ptyvisor/examples/ptyvisord.toml --user "$ACCOUNT"
# The installed configuration names no account: the daemon must refuse to start on it.
out=$(/usr/sbin/ptyvisord --check-config --config /etc/ptyvisor/ptyvisord.toml 2>&1)
rc=$?
if [ "$rc" = 2 ] && grep -q "no account configured" <<<"$out"; then
    ok "the installed config is refused until an account is set (exit 2)"
else
    bad "the installed config is refused until an account is set (exit 2)" "exit $rc: $out"
fi

# --- 4. units -----------------------------------------------------------------------------------
unit_paths=()
for u in "${UNITS[@]}"; do unit_paths+=("$UNIT_DIR/$u"); done
out=$(systemd-analyze verify "${unit_paths[@]}" 2>&1)
rc=$?
if [ "$rc" = 0 ] && [ -z "$out" ]; then ok "systemd-analyze verify ${UNITS[*]}"
else bad "systemd-analyze verify ${UNITS[*]}" "exit $rc: $out"; fi
out=$(systemd-analyze security --offline=yes "$UNIT_DIR/ptyvisord.service" 2>&1)
score=$(sed -n 's/.*Overall exposure level for ptyvisord.service: \([0-9.]*\).*/\1/p' <<<"$out")
if [ -n "$score" ] && awk -v s="$score" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(s <= m) }'; then
    ok "systemd-analyze security: exposure $score (at most $MAX_EXPOSURE)"
else
    bad "systemd-analyze security: exposure ${score:-?} (at most $MAX_EXPOSURE)" "$(tail -n 5 <<<"$out")"
fi

# --- 5. man pages -------------------------------------------------------------------------------
for page in "${MANPAGES[@]}"; do
    out=$(groff -man -ww -z "$page" 2>&1)
    rc=$?
    if [ "$rc" = 0 ] && [ -z "$out" ]; then ok "groff -man -ww -z $page"
    else bad "groff -man -ww -z $page" "exit $rc: $out"; fi
done
if command -v man >/dev/null; then
    for name in ptyvisor ptyvisord ptyvisord.toml; do
        check "man -w $name" man -w "$name"
    done
fi

# --- 6. the installed daemon under the installed units, in a private systemd ------------------
if ! out=$("$ROOT/tests/harness/up.sh" "$HARNESS_DIR" 2>&1); then
    bad "harness up" "$out"
    finish
fi
ok "harness up"
# shellcheck disable=SC1091
. "$HARNESS_DIR/env"
HX() { $HARNESS_EXEC "$@"; }
S=$HARNESS_STATE
# The harness reads units only from $S/units: install ours there, as they are installed, with
# drop-ins as an administrator would write them (the account's group on the socket; the
# account and backend for the daemon).
group=$(id -gn "$ACCOUNT")
for u in "${UNITS[@]}"; do cp "$UNIT_DIR/$u" "$S/units/$u"; done
mkdir -p "$S/units/ptyvisord.socket.d" "$S/units/ptyvisord.service.d"
printf '[Socket]\nSocketGroup=%s\n' "$group" > "$S/units/ptyvisord.socket.d/account.conf"
printf '[Service]\nExecStart=\nExecStart=/usr/sbin/ptyvisord --config /etc/ptyvisor/ptyvisord.toml --backend %s --user %s --socket %s\n' \
    "$BACKEND" "$ACCOUNT" "$SOCKET" > "$S/units/ptyvisord.service.d/test.conf"
HX systemctl daemon-reload

show_daemon() {
    HX systemctl --no-pager status ptyvisord.service 2>&1 | head -n 20
    HX journalctl --no-pager -u ptyvisord.service -n 20 2>&1
}

check "systemctl start ptyvisord.socket" HX timeout 20 systemctl start ptyvisord.socket
sock_info=$(stat -c '%F %a %U:%G' "$S$SOCKET" 2>&1)
if [ "$sock_info" = "socket 660 root:$group" ]; then ok "socket $SOCKET: mode 0660, root:$group"
else bad "socket $SOCKET: mode 0660, root:$group" "$sock_info"; fi

# Type=notify: start returns once the daemon has sent READY=1 (or failed).
out=$(HX timeout 30 systemctl start ptyvisord.service 2>&1)
active=
for _ in $(seq 100); do                      # at most 10 s
    active=$(HX systemctl is-active ptyvisord.service 2>/dev/null)
    [ "$active" = active ] || [ "$active" = failed ] && break
    sleep 0.1
done
if [ "$active" = active ]; then
    ok "ptyvisord.service active (backend $BACKEND, socket-activated)"
else
    bad "ptyvisord.service active (backend $BACKEND, socket-activated)" "is-active: $active; $out
$(show_daemon)"
fi
props=$(HX systemctl show -p StatusText -p WatchdogUSec -p NotifyAccess -p Type ptyvisord.service 2>&1)
if [ "$active" = active ] && grep -q '^StatusText=Serving' <<<"$props" && grep -q '^WatchdogUSec=30s' <<<"$props"; then
    ok "sd_notify status and watchdog"
else
    bad "sd_notify status and watchdog" "$props"
fi

# A session, as the account, from a directory it can open.
out=$(cd /tmp && HX timeout 30 runuser -u "$ACCOUNT" -- /usr/bin/ptyvisor run --socket "$SOCKET" -- echo hello 2>&1)
rc=$?
if [ "$rc" = 0 ] && [ "$(tr -d '\r' <<<"$out")" = hello ]; then
    ok "session: ptyvisor run -- echo hello (exit 0, output hello)"
else
    bad "session: ptyvisor run -- echo hello (exit 0, output hello)" "exit $rc, output: $out
$(show_daemon)"
fi
out=$(cd /tmp && HX timeout 30 runuser -u "$ACCOUNT" -- /usr/bin/ptyvisor run --socket "$SOCKET" -- sh -c 'exit 7' 2>&1)
rc=$?
if [ "$rc" = 7 ]; then ok "session: exit status 7 passed through"
else bad "session: exit status 7 passed through" "exit $rc, output: $out"; fi
check "ptyvisor status as root" HX timeout 10 /usr/bin/ptyvisor status --socket "$SOCKET"
journal=$(HX journalctl --no-pager -u ptyvisord.service -o verbose 2>&1)
if grep -q 'MESSAGE=session ended' <<<"$journal" && grep -q '^ *UNIT=ptyvisor-' <<<"$journal" &&
   grep -q '^ *EXIT=0$' <<<"$journal" && grep -q '^ *REASON=exited$' <<<"$journal"; then
    ok "journal: session ended with UNIT=, EXIT=, REASON= fields"
else
    bad "journal: session ended with UNIT=, EXIT=, REASON= fields" \
        "$(grep -E '^ *(MESSAGE|UNIT|EXIT|REASON|ERROR|CODE)=' <<<"$journal" | tail -n 20)"
fi

# What the unit gives the daemon, and what its sandbox still lets it do: the relay's
# priority (Nice=, CPUWeight=), its short time slice, and the screen worker it spawns (which
# raises its own nice value: SystemCallFilter= must allow that much of @resources).
main_pid=$(HX systemctl show -p MainPID --value ptyvisord.service 2>&1)
nice=$(HX ps -o ni= -p "$main_pid" 2>&1 | tr -d ' ')
if [ "$nice" = -10 ]; then ok "the daemon runs at nice -10 (Nice=)"
else bad "the daemon runs at nice -10 (Nice=)" "ps: $nice"; fi
sandbox_errors=$(grep -E -A12 "MESSAGE=(cannot raise the relay|cannot ask for a short time slice|cannot start the screen worker|the screen worker exited)" <<<"$journal" |
    grep -E "MESSAGE=|ERROR=")
if [ -z "$sandbox_errors" ]; then ok "journal: no scheduling or screen-worker failure under the unit's sandbox"
else bad "journal: no scheduling or screen-worker failure under the unit's sandbox" "$sandbox_errors"; fi
out=$(cd /tmp && HX timeout 30 runuser -u "$ACCOUNT" -- /usr/bin/ptyvisor run --socket "$SOCKET" -- sh -c 'echo "nice $(cut -d" " -f19 /proc/self/stat)"' 2>&1 | tr -d '\r')
if [ "$out" = "nice 0" ]; then ok "a session runs at nice 0, not the daemon's -10"
else bad "a session runs at nice 0, not the daemon's -10" "$out"; fi
pv() { local sub=$1; shift; HX timeout 30 runuser -u "$ACCOUNT" -- /usr/bin/ptyvisor "$sub" --socket "$SOCKET" "$@"; }
sid=$(cd /tmp && pv run --detach -- sh -c 'echo screen-check; exec cat' 2>&1 | tr -d '\r')
screen=$( (cd /tmp && pv wait --for 'text:screen-check' --timeout 20 "$sid" >/dev/null && pv screen "$sid") 2>&1)
(cd /tmp && pv kill "$sid") >/dev/null 2>&1
if grep -q '^screen-check' <<<"$screen"; then ok "screen: the installed screen worker renders a session"
else bad "screen: the installed screen worker renders a session" "$screen
$(HX journalctl --no-pager -u ptyvisord.service -o cat 2>&1 | grep -i screen | tail -n 10)"; fi

# An upgrade: dpkg -i of the package over itself, inside the private systemd, so that its
# postinst does what an upgrade does (daemon-reload, try-restart). A detached session waiting
# for input must go on across it: the daemon hands its terminal and log to systemd's fd store.
id=$(cd /tmp && pv run --detach -- sh -c 'echo before-upgrade; read line; echo "after-upgrade $line"' 2>&1 | tr -d '\r')
pid_before=$(HX systemctl show -p MainPID --value ptyvisord.service 2>&1)
if [[ "$id" =~ ^[0-9a-f]{32}$ ]] && (cd /tmp && pv wait --for 'text:before-upgrade' --timeout 20 "$id") >/dev/null 2>&1; then
    out=$(HX dpkg -i "$deb" 2>&1)
    rc=$?
    pid_after=$(HX systemctl show -p MainPID --value ptyvisord.service 2>&1)
    (cd /tmp && pv send "$id" $'go\n') >/dev/null 2>&1
    (cd /tmp && pv wait --for exit --timeout 20 "$id") >/dev/null 2>&1
    logs=$(cd /tmp && pv logs "$id" 2>&1 | tr -d '\r')
    expected=$'before-upgrade\ngo\nafter-upgrade go'
    if [ "$rc" = 0 ] && [ "$pid_before" != "$pid_after" ] && [ "$logs" = "$expected" ]; then
        ok "upgrade: dpkg -i restarts the daemon (MainPID $pid_before -> $pid_after) and a detached session goes on"
    else
        bad "upgrade: dpkg -i restarts the daemon and a detached session goes on" \
            "dpkg exit $rc; MainPID $pid_before -> $pid_after; the session's log:
$logs
$(tail -n 5 <<<"$out")
$(show_daemon)"
    fi
else
    bad "upgrade: a detached session to carry across it" "run --detach: $id
$(show_daemon)"
fi

# SIGTERM: the daemon ends its sessions and exits 0.
HX timeout 60 systemctl stop ptyvisord.service >/dev/null 2>&1
result=$(HX systemctl show -p Result -p ExecMainStatus ptyvisord.service 2>&1 | tr '\n' ' ')
if [ "$active" = active ] && [ "$result" = "Result=success ExecMainStatus=0 " ]; then
    ok "systemctl stop: clean exit"
else
    bad "systemctl stop: clean exit" "$result"
fi
HX systemctl stop ptyvisord.socket >/dev/null 2>&1
"$ROOT/tests/harness/down.sh" "$HARNESS_DIR" >/dev/null 2>&1
if [ ! -e "$HARNESS_DIR" ]; then ok "harness down"; else bad "harness down"; fi

# --- 7. remove and purge ----------------------------------------------------------------------
check "dpkg -r ptyvisor" dpkg -r ptyvisor
left=
for f in /usr/sbin/ptyvisord /usr/bin/ptyvisor "${unit_paths[@]}" /usr/lib/tmpfiles.d/ptyvisor.conf; do
    [ -e "$f" ] && left="$left $f"
done
if [ -z "$left" ] && [ -e /etc/ptyvisor/ptyvisord.toml ]; then ok "removed; the conffile stays until purge"
else bad "removed; the conffile stays until purge" "left:${left:- none}; conffile present: $([ -e /etc/ptyvisor/ptyvisord.toml ] && echo yes || echo no)"; fi
check "dpkg -P ptyvisor" dpkg -P ptyvisor
installed_by_us=0
left=
for f in /etc/ptyvisor /var/lib/ptyvisor; do [ -e "$f" ] && left="$left $f"; done
if [ -z "$left" ]; then ok "purged: /etc/ptyvisor and /var/lib/ptyvisor gone"
else bad "purged: /etc/ptyvisor and /var/lib/ptyvisor gone" "left:$left"; fi

finish
