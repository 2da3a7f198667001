#!/bin/bash
# bench/run.sh - the ptyvisor benchmark suite: one entry point (docs/performance.md).
#
#   bench/run.sh [--smoke] [--only NAME,...] [--out DIR] [--rounds N] [--bytes N]
#                [--no-ssh] [--no-systemd] [--baseline DIR]
#
# NAMEs: memory idle-sessions replay observers throughput latency fairness start scale cpu syscalls micro
# (default: all).
# Builds ptyvisord, ptyvisor, termbench, sessionbench and micro_protocol (Release) in $PTYVISOR_BENCH_BUILD
# (default build/bench), starts a private ptyvisord (direct backend) as root, runs every
# contender side by side, interleaved, and writes DIR/results.{json,csv,md} and
# DIR/performance.png (default DIR: bench/results).
#
# Exit status: 0 when every contender that can always run here (forkpty, script, ptyvisor-raw,
# ptyvisor (CLI)) worked, every throughput sample with the byte count the terminal must relay;
# 1 when one of them failed (nothing is retried); 2 on bad usage or a failed build. Timing
# never fails it.
# --smoke: tiny sizes, one round, installs nothing; under 2 minutes once built.
# Every run records its start and end (UTC), the commit and the load average at both; one
# whose 1-minute load average at either was above half the CPUs prints and writes
# "overlapped other work (load X)". The daemon is measured as ptyvisord and its screen
# worker, each on its own and together.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${PTYVISOR_BENCH_BUILD:-$ROOT/build/bench}

smoke=0
for a in "$@"; do [ "$a" = --smoke ] && smoke=1; done
[ "$(id -u)" = 0 ] || { echo "bench/run.sh: must run as root (ptyvisord runs as root)" >&2; exit 2; }

need() { command -v "$1" >/dev/null 2>&1; }
install() {  # install Debian packages unless --smoke; never fatal
    if [ "$smoke" = 1 ]; then echo "bench/run.sh: --smoke installs nothing; missing: $*" >&2; return 0; fi
    echo "bench/run.sh: installing $*" >&2
    DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1 ||
        echo "bench/run.sh: could not install $* (continuing without)" >&2
}
need python3 || install python3
need python3 || { echo "bench/run.sh: python3 is required" >&2; exit 2; }
need script || install util-linux
need setpriv || install util-linux
need gnuplot || install gnuplot-nox
need strace || install strace

"$ROOT/scripts/ensure-test-account.sh" ptyvisor-test >/dev/null

# Release build of what is measured. -Wno-restrict: g++ 12 at -O2/-O3 reports a false
# positive -Wrestrict inside libstdc++'s string code (GCC bug 105329), which -Werror would
# turn into a failed build of src/common/log.cpp and src/backends/direct/spawn.cpp.
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-Wno-restrict \
        -DPTYVISOR_TESTS=OFF -DPTYVISOR_BENCH=ON >"$BUILD.configure.log" 2>&1 ||
        { cat "$BUILD.configure.log" >&2; exit 2; }
fi
cmake --build "$BUILD" --target ptyvisord ptyvisor ptyvisor-screen termbench sessionbench >"$BUILD.build.log" 2>&1 ||
    { tail -40 "$BUILD.build.log" >&2; exit 2; }
cmake --build "$BUILD" --target micro_protocol >>"$BUILD.build.log" 2>&1 ||
    echo "bench/run.sh: micro_protocol did not build (Google Benchmark missing?); it will be skipped" >&2

limit=$([ "$smoke" = 1 ] && echo 300 || echo 3600)
exec timeout --signal=TERM --kill-after=30 "$limit" python3 "$ROOT/bench/bench.py" --build "$BUILD" "$@"
