#!/bin/bash
# valgrind.sh RELIABILITY_TESTS PTYVISORD [direct|systemd] - memcheck on the daemon (scenario 7).
#
# Runs the Valgrind.* test of the reliability suite with PTYVISORD_BIN pointing at a wrapper
# that execs the daemon under
#   valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect
#            --track-fds=yes
# with the direct backend (default), or the systemd backend inside the test harness
# (tests/systemd/run.sh): ~20 sessions of different kinds, a dozen hostile connections, then
# SIGTERM with a session live. Valgrind 3.19 lacks pidfd_open, without which the direct
# backend cannot supervise a session: only the systemd run covers the session paths. The test asserts that the daemon exits 0, so any memory error
# or definite/indirect leak (exit code 99) fails it. valgrind's own report is printed.
# Needs root and valgrind (installed with apt-get if missing).
set -uo pipefail
tests=$(realpath "${1:?usage: valgrind.sh RELIABILITY_TESTS PTYVISORD}")
daemon=$(realpath "${2:?usage: valgrind.sh RELIABILITY_TESTS PTYVISORD}")
backend=${3:-direct}
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
  --track-fds=yes --log-file="$work/valgrind.%p.log" "$daemon" "\$@"
WRAPPER
chmod 755 "$work/ptyvisord"

case "$backend" in
    direct) inside=() ;;
    systemd) inside=("$HERE/../systemd/run.sh") ;;
    *) echo "valgrind.sh: backend must be direct or systemd" >&2; exit 2 ;;
esac
PTYVISORD_BIN="$work/ptyvisord" PTYVISOR_VALGRIND=1 PTYVISOR_TEST_BACKEND=$backend \
    "${inside[@]}" "$tests" --gtest_filter='Valgrind.*' --gtest_also_run_disabled_tests
rc=$?
for log in "$work"/valgrind.*.log; do
    [ -e "$log" ] || continue
    echo "--- $(basename "$log")"
    if [ "$rc" != 0 ]; then cat "$log"; else
        grep -E "ERROR SUMMARY|definitely lost|indirectly lost|possibly lost|still reachable|FILE DESCRIPTORS|All heap blocks" "$log"
    fi
done
exit "$rc"
