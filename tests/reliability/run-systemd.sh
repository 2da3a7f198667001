#!/bin/bash
# run-systemd.sh RELIABILITY_TESTS [gtest args...] - the reliability suite against the systemd
# backend, inside the project's throw-away systemd (tests/harness via tests/systemd/run.sh):
# the allow_units flood (the agent is a transient unit, the flooders are refused at accept),
# forged bus signals from the agent's account, crash safety with units, and fd hostility and
# exit fidelity once more with units.
# PTYVISOR_RELIABILITY_FILTER overrides the default gtest filter.
# PTYVISOR_REQUIRE_SYSTEMD=1 makes the suite fail, not skip, a test that finds no systemd
# harness, and fail the run if any test was skipped or none ran (tests/reliability/main.cpp):
# this run exists to run those tests.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$(realpath "${1:?usage: run-systemd.sh RELIABILITY_TESTS [ARGS...]}")
shift
filter=${PTYVISOR_RELIABILITY_FILTER:-'Kinds/FloodAllowUnits.*:FloodFromTheAgentsUnit.*:ForgedBusSignals.*:CrashSafety.*:ExitFidelity.*:FdHostility.*'}
export PTYVISOR_TEST_BACKEND=systemd
export PTYVISOR_REQUIRE_SYSTEMD=1
exec "$HERE/../systemd/run.sh" "$BIN" --gtest_filter="$filter" "$@"
