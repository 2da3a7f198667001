#!/bin/bash
# restart.sh [BUILD_DIR] - sessions across restarts of ptyvisord under a real systemd (issue 16;
# docs/operations.md "What survives what"). Boots the throw-away systemd of tests/harness
# (through run.sh), runs ptyvisord in it as a notify service with the systemd backend, and:
#
#   with FileDescriptorStoreMax= (default 64): DETACHED detached sessions and RUNS
#     `ptyvisor run` clients, each a numbered, checksummed stream, and (INTERACTIVE=1) one interactive
#     bash through `ptyvisor run` with a background job, live through RESTARTS `systemctl
#     restart`, KILLS `kill -9` of the daemon (Restart=on-failure) and UPGRADES upgrades (a new
#     binary installed over the running one, then what the package's postinst does:
#     daemon-reload and try-restart); then every session must still be there, every stream
#     must hash (SHA-256) to what its program wrote, every `ptyvisor run` must have exited 0
#     with exactly its stream on stdout, and bash's job must still run.
#   with FD_STORE_MAX=0: today's behaviour, one restart ends every session and leaves no unit.
#
# It prints the daemon's unavailability after each restart and kill (from the restart command
# to the first answered `ptyvisor ls`): a `ptyvisor run` pauses for about that long (it
# retries every 50 ms), and the pauses the `ptyvisor run` clients measured themselves.
# Environment: DETACHED (4), RUNS (2), INTERACTIVE (1), RESTARTS (3), KILLS (3), UPGRADES (1),
# LINES (300 per stream), INTERVAL (0.05 s between lines), FD_STORE_MAX (64); SHOW_JOURNAL=1
# prints the daemon's journal. Run as root. Exit 0 on success.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" != --inside ]; then
    build=$(cd "${1:-$HERE/../../build/default}" && pwd)
    exec "$HERE/run.sh" "$0" --inside "$build"
fi
build=$2
DETACHED=${DETACHED:-4} RUNS=${RUNS:-2} INTERACTIVE=${INTERACTIVE:-1} RESTARTS=${RESTARTS:-3} KILLS=${KILLS:-3}
UPGRADES=${UPGRADES:-1} LINES=${LINES:-300} INTERVAL=${INTERVAL:-0.05} FD_STORE_MAX=${FD_STORE_MAX:-64}
account=ptyvisor-test
unit=ptyvisord-under-test.service
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

run=$(mktemp -d /tmp/ptyvisor-restart.XXXXXX)
chmod 0755 "$run"
install -m 0755 "$build/src/cli/ptyvisor" "$run/ptyvisor"
install -m 0755 "$build/src/server/ptyvisord" "$run/ptyvisord"
mkdir -m 0700 "$run/state"
cat > "$run/ptyvisord.toml" <<TOML
user = "$account"
socket = "$run/ptyvisord.sock"
backend = "systemd"
state_directory = "$run/state"
[limits]
max_sessions = 32
[timeouts]
reattach = 30
TOML
cleanup() {
    systemctl stop "$unit" >/dev/null 2>&1
    systemctl reset-failed "$unit" >/dev/null 2>&1
    jobs -p | xargs -r kill 2>/dev/null
    rm -rf "$run"
}
trap cleanup EXIT

as_agent() { (cd "$run" && setpriv --reuid="$account" --regid="$account" --init-groups \
    env -i PATH=/usr/bin:/bin HOME="$run" PTYVISOR_SOCKET="$run/ptyvisord.sock" "$@"); }
now_ms() { date +%s%3N; }
# Waits until the daemon answers (a new one, after a restart); prints how long that took.
wait_serving() {
    local from=$1 deadline=$(( $(now_ms) + 60000 ))
    until as_agent "$run/ptyvisor" ls --json >/dev/null 2>&1; do
        [ "$(now_ms)" -lt "$deadline" ] || { fail "the daemon did not come back within 60 s"; return 1; }
        sleep 0.02
    done
    echo $(( $(now_ms) - from ))
}
# The program of stream K, and the bytes it puts on its terminal (\n becomes \r\n): numbered
# lines, each with a check value of its number (shell arithmetic: no process per line), and
# the whole stream is compared by SHA-256.
stream_program() {
    echo "i=1; while [ \$i -le $LINES ]; do echo \"s$1 line \$i check \$(( (i * 2654435761 + $2) % 4294967296 ))\"; i=\$((i+1)); sleep $INTERVAL; done"
}
expected_stream() {
    local i
    for ((i = 1; i <= LINES; i++)); do
        printf 's%s line %s check %s\r\n' "$1" "$i" "$(( (i * 2654435761 + $2) % 4294967296 ))"
    done
}

systemd-run --quiet --unit="$unit" -p Type=notify -p NotifyAccess=main -p Restart=on-failure \
    -p RestartSec=100ms -p StartLimitIntervalSec=0 -p TimeoutStopSec=30 -p FileDescriptorStoreMax="$FD_STORE_MAX" \
    "$run/ptyvisord" --config "$run/ptyvisord.toml" || { echo "cannot start the daemon" >&2; exit 1; }
wait_serving "$(now_ms)" >/dev/null || exit 1

ids=()
for ((k = 1; k <= DETACHED; k++)); do
    id=$(as_agent "$run/ptyvisor" run --detach -- sh -c "$(stream_program "d$k" "$k")") || fail "cannot start detached $k"
    ids+=("$id")
done
run_pids=()
for ((k = 1; k <= RUNS; k++)); do
    # stdin stays open and silent (no ^D): the stream is the only thing on stdout.
    as_agent "$run/ptyvisor" run -- sh -c "$(stream_program "r$k" "$((100 + k))")" \
        < <(sleep 3600) > "$run/run$k.out" 2> "$run/run$k.err" &
    run_pids+=($!)
done
if [ "$INTERACTIVE" = 1 ]; then
    # An interactive shell whose input we type through a FIFO, with a job in the background.
    mkfifo "$run/bash.in"
    as_agent "$run/ptyvisor" run -- bash --norc --noprofile -i < "$run/bash.in" > "$run/bash.out" 2> "$run/bash.err" &
    bash_pid=$!
    exec 7> "$run/bash.in"
    echo 'sleep 3600 & echo "JOB-STARTED-$((6 * 7))"' >&7
    deadline=$(( $(now_ms) + 30000 ))
    until grep -q JOB-STARTED-42 "$run/bash.out"; do
        [ "$(now_ms)" -lt "$deadline" ] || { fail "bash did not start its job: $(cat "$run/bash.out" "$run/bash.err")"; break; }
        sleep 0.1
    done
fi
sleep 1  # every stream has begun (its first lines are in the logs)

pauses=()
round_kind() {
    if [ "$1" -le "$RESTARTS" ]; then echo restart
    elif [ "$1" -le $((RESTARTS + KILLS)) ]; then echo kill
    else echo upgrade; fi
}
for ((n = 1; n <= RESTARTS + KILLS + UPGRADES; n++)); do
    from=$(now_ms)
    kind=$(round_kind "$n")
    if [ "$kind" = restart ]; then
        systemctl restart "$unit" || fail "systemctl restart failed"
    elif [ "$kind" = upgrade ]; then
        # As dpkg does: the new file is renamed over the old one, then the postinst runs.
        install -m 0755 "$build/src/server/ptyvisord" "$run/ptyvisord.new"
        mv -f "$run/ptyvisord.new" "$run/ptyvisord"
        systemctl daemon-reload
        systemctl try-restart "$unit" || fail "systemctl try-restart failed"
        exe=$(readlink "/proc/$(systemctl show -P MainPID "$unit")/exe")
        [ "$exe" = "$run/ptyvisord" ] || fail "after the upgrade the daemon runs $exe"
    else
        old=$(systemctl show -P MainPID "$unit")
        kill -9 "$old"
        # Restart=on-failure brings a new main process.
        until new=$(systemctl show -P MainPID "$unit") && [ "$new" != 0 ] && [ "$new" != "$old" ] &&
              [ "$(systemctl show -P ActiveState "$unit")" = active ]; do sleep 0.02; done
    fi
    pause=$(wait_serving "$from") || break
    pauses+=("$pause")
    listed=$(as_agent "$run/ptyvisor" ls --json | grep -o '"id"' | wc -l)
    echo "round $n ($kind): daemon back after ${pause} ms, $listed sessions listed"
    sleep 0.5  # pacing: the streams run on between rounds
done

if [ "$FD_STORE_MAX" = 0 ]; then
    # Today's behaviour: every session was cleaned at the first restart, nothing is left.
    listed=$(as_agent "$run/ptyvisor" ls --json | grep -o '"state": *"running"' | wc -l)
    [ "$listed" = 0 ] || fail "$listed sessions still running without the fd store"
    if [ "$INTERACTIVE" = 1 ]; then exec 7>&-; wait "$bash_pid"; fi
    left=$(systemctl list-units --all --plain --no-legend 'ptyvisor-*' | grep -c ' active ' || true)
    [ "$left" = 0 ] || fail "$left session units left behind"
    for ((k = 1; k <= RUNS; k++)); do
        wait "${run_pids[k-1]}"
        rc=$?
        grep -q "session ended: shutdown" "$run/run$k.err" && [ "$rc" != 0 ] ||
            fail "ptyvisor run $k exited $rc without reporting the shutdown: $(cat "$run/run$k.err")"
    done
else
    for ((k = 1; k <= DETACHED; k++)); do
        id=${ids[k-1]}
        as_agent "$run/ptyvisor" wait "$id" --timeout 600 >/dev/null || fail "detached $k ($id) did not exit cleanly"
        got=$(as_agent "$run/ptyvisor" logs "$id" | sha256sum | cut -d' ' -f1)
        want=$(expected_stream "d$k" "$k" | sha256sum | cut -d' ' -f1)
        [ "$got" = "$want" ] || fail "detached $k: stream hash $got, expected $want"
    done
    if [ "$INTERACTIVE" = 1 ]; then
        echo 'kill -0 %1 && echo "JOB-ALIVE-$((6 * 7))"; kill %1; exit 0' >&7
        exec 7>&-
        wait "$bash_pid"
        rc=$?
        grep -q JOB-ALIVE-42 "$run/bash.out" || fail "bash's job did not survive: $(tail -c 300 "$run/bash.out")"
        [ "$rc" = 0 ] || fail "the bash session exited $rc: $(cat "$run/bash.err")"
    fi
    for ((k = 1; k <= RUNS; k++)); do
        wait "${run_pids[k-1]}"
        rc=$?
        [ "$rc" = 0 ] || fail "ptyvisor run $k exited $rc: $(cat "$run/run$k.err")"
        got=$(sha256sum < "$run/run$k.out" | cut -d' ' -f1)
        want=$(expected_stream "r$k" "$((100 + k))" | sha256sum | cut -d' ' -f1)
        [ "$got" = "$want" ] || fail "ptyvisor run $k: stdout hash $got, expected $want ($(wc -c < "$run/run$k.out") bytes)"
    done
fi
# The pauses `ptyvisor run` itself measured (lost connection -> ATTACHED again), one per
# re-attach: the figure a person at the terminal sees.
client_pauses=()
for f in "$run"/run*.err "$run"/bash.err; do
    [ -e "$f" ] || continue
    while read -r ms; do client_pauses+=("$ms"); done < <(sed -n 's/^ptyvisor: re-attached to the session after \([0-9]*\) ms$/\1/p' "$f")
done
# (Two rounds closer together than a client's retry may cost it one re-attach, not two.)
if [ "$FD_STORE_MAX" != 0 ] && [ "${#client_pauses[@]}" -lt "$RUNS" ]; then
    fail "the ptyvisor run clients re-attached ${#client_pauses[@]} times"
fi
percentiles() {  # label, values...: nearest-rank p50, p99, max
    local label=$1; shift
    local sorted count
    sorted=$(printf '%s\n' "$@" | sort -n)
    count=$#
    echo "$label over $count: p50 $(echo "$sorted" | sed -n "$(( (count + 1) / 2 ))p") ms," \
        "p99 $(echo "$sorted" | sed -n "$(( (count * 99 + 99) / 100 ))p") ms, max $(echo "$sorted" | tail -1) ms"
}
[ "${#client_pauses[@]}" -gt 0 ] && percentiles "pause seen by ptyvisor run clients (re-attaches)" "${client_pauses[@]}"
[ "${#pauses[@]}" -gt 0 ] && percentiles "daemon unavailability (restart command -> first answered ls, polled by this script)" "${pauses[@]}"
if [ -n "${SHOW_JOURNAL:-}" ]; then
    journalctl --no-pager -o short-precise -u "$unit" >&2 2>/dev/null || true
fi
if [ "$failures" != 0 ]; then
    echo "--- daemon journal ---" >&2
    journalctl --no-pager -u "$unit" -n 60 >&2 2>/dev/null || true
    echo "restart.sh: $failures failures" >&2
    exit 1
fi
echo "restart.sh: OK ($DETACHED detached, $RUNS run, interactive bash $INTERACTIVE, $RESTARTS restarts, $KILLS kill -9, $UPGRADES upgrades, fd store $FD_STORE_MAX)"
