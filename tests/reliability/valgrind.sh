#!/bin/bash
# valgrind.sh TESTS PTYVISORD [direct|systemd] [GTEST_ARGS...] - memcheck on the daemon
# (scenario 7).
#
# Runs a GoogleTest binary with PTYVISORD_BIN pointing at a wrapper that execs every daemon it
# starts under
#   valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect
#            --track-fds=yes --suppressions=re2.supp
# (re2.supp: RE2's deliberate reads of uninitialised memory, and nothing else) with the direct backend (default), or the systemd backend inside the test harness
# (tests/systemd/run.sh). Without GTEST_ARGS it runs the Valgrind.* test of the reliability
# suite: ~20 sessions of different kinds, a dozen hostile connections, then SIGTERM with a
# session live; that test asserts the daemon exits 0. Given the integration suite and no
# GTEST_ARGS filter, it runs the whole suite, one daemon per test.
# Either way every daemon's report is judged afterwards, and so is GoogleTest's: the run fails
# when no test ran or one was skipped that tests/skip-allowlist.txt does not allow (context
# valgrind; tests/check-results.py). One that exited must show
#   - 0 errors (definite and indirect leaks count as errors here),
#   - 0 bytes possibly lost in its LEAK SUMMARY (or no leak summary: all heap blocks freed),
#   - only descriptors "<inherited from parent>" in its --track-fds report: a descriptor the
#     daemon opened itself and still held at exit is a descriptor leak.
# One its test killed with SIGKILL has no summary, and must show no error before the kill.
# Valgrind 3.19 lacks pidfd_open, without which the direct backend cannot supervise a
# session: only the systemd runs cover the session paths.
# Needs root and valgrind (installed with apt-get if missing).
set -uo pipefail

# What is wrong with the report of a daemon that exited, one line per finding; nothing when
# it is clean. VALGRIND_JUDGE=LOG valgrind.sh prints the findings for one log and exits.
judge_exited() {
    local log=$1
    grep -q "ERROR SUMMARY: 0 errors" "$log" || echo "errors: $(grep -m1 'ERROR SUMMARY' "$log")"
    # "possibly lost: 1,024 bytes in 2 blocks"; absent when all heap blocks were freed.
    grep -E '== +possibly lost: ' "$log" | grep -Evq 'possibly lost: 0 bytes in 0 blocks' &&
        echo "possibly lost: $(grep -Em1 '== +possibly lost: ' "$log" | sed 's/.*possibly lost: //')"
    grep -q "FILE DESCRIPTORS: " "$log" || echo "no --track-fds report"
    # Each "Open <kind> N: <what>" line is followed by "<inherited from parent>" or by the
    # stack that opened it.
    awk 'function judge(line) { if (pending != "" && line !~ /<inherited from parent>/) print "not inherited: " pending }
         /== Open .*[0-9]+:/ { judge($0); pending = $0; sub(/^==[0-9]+== /, "", pending); next }
         pending != "" { judge($0); pending = "" }
         END { judge("") }' "$log"
}
if [ -n "${VALGRIND_JUDGE:-}" ]; then
    judge_exited "$VALGRIND_JUDGE"
    exit 0
fi

usage="usage: valgrind.sh TESTS PTYVISORD [direct|systemd] [GTEST_ARGS...]"
tests=$(realpath "${1:?$usage}")
daemon=$(realpath "${2:?$usage}")
backend=${3:-direct}
shift $(($# < 3 ? $# : 3))
gtest_args=("$@")
[ ${#gtest_args[@]} -gt 0 ] || gtest_args=(--gtest_filter='Valgrind.*' --gtest_also_run_disabled_tests)
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "valgrind.sh: needs root" >&2; exit 1; }
if ! command -v valgrind >/dev/null; then
    echo "valgrind.sh: installing valgrind" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y valgrind >/dev/null || { echo "valgrind.sh: no valgrind" >&2; exit 1; }
fi

work=$(mktemp -d /tmp/ptyvisor-valgrind.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
cat > "$work/ptyvisord" <<WRAPPER
#!/bin/sh
exec valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
  --track-fds=yes --suppressions="$HERE/re2.supp" --log-file="$work/valgrind.%p.log" "$daemon" "\$@"
WRAPPER
chmod 755 "$work/ptyvisord"

case "$backend" in
    direct) inside=() ;;
    systemd) inside=("$HERE/../systemd/run.sh") ;;
    *) echo "valgrind.sh: backend must be direct or systemd" >&2; exit 2 ;;
esac
PTYVISORD_BIN="$work/ptyvisord" PTYVISOR_VALGRIND=1 PTYVISOR_TEST_BACKEND=$backend \
    "${inside[@]}" "$tests" "${gtest_args[@]}" --gtest_output="json:$work/report.json"
rc=$?
# A skip is not a pass, and a filter that matched nothing passes in GoogleTest 1.12.
python3 "$HERE/../check-results.py" valgrind "$work/report.json" || { [ "$rc" != 0 ] || rc=1; }

# The first line of each kind of error memcheck reports.
error_start='^==[0-9]+== (Invalid (read|write|free)|Conditional jump|Use of uninitialised|Syscall param|Mismatched free|Source and destination overlap|Argument .* of function|[0-9,]+ bytes in [0-9,]+ blocks are (definitely|indirectly) lost)'

exited=0 exited_bad=0 killed=0 bad=0
for log in "$work"/valgrind.*.log; do
    [ -e "$log" ] || continue
    if grep -q "ERROR SUMMARY" "$log"; then
        exited=$((exited + 1))
        findings=$(judge_exited "$log")
        [ -z "$findings" ] || { bad=$((bad + 1)); exited_bad=$((exited_bad + 1)); echo "--- $(basename "$log"): $findings"; cat "$log"; }
    else
        killed=$((killed + 1))
        ! grep -Eq "$error_start" "$log" || { bad=$((bad + 1)); echo "--- $(basename "$log") (killed): errors"; cat "$log"; }
    fi
done
echo "[valgrind] $((exited + killed)) daemons: $((exited - exited_bad)) of $exited that exited with 0 errors," \
     "0 bytes definitely, indirectly or possibly lost and no descriptor open at exit that was not" \
     "inherited; $killed killed by their test; $bad with findings"
if [ "$rc" = 0 ] && [ "$bad" = 0 ]; then
    # One full summary, for the record.
    for log in "$work"/valgrind.*.log; do
        grep -q "ERROR SUMMARY" "$log" || continue
        grep -E "ERROR SUMMARY|definitely lost|indirectly lost|possibly lost|still reachable|FILE DESCRIPTORS|All heap blocks" "$log"
        break
    done
fi
[ "$exited" -gt 0 ] || { echo "valgrind.sh: no daemon exited under valgrind" >&2; exit 1; }
[ "$bad" = 0 ] || exit 1
exit "$rc"
