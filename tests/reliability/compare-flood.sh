#!/bin/bash
# compare-flood.sh RELIABILITY_TESTS BEFORE_PTYVISORD AFTER_PTYVISORD [KIND...]
# The uid-only flood scenario (test_flood.cpp, Kinds/Flood.*) at full size against two
# daemons, interleaved kind by kind (before, then after), so that both see the same load on
# a shared machine. Prints the agent's latency line of each run; the figures are what
# docs/reliability.md publishes, never a pass/fail threshold (a failed run is reported).
# KIND: none hold slowloris garbage connect_close fail_auth all (default: every one).
set -uo pipefail
tests=$(realpath "${1:?usage: compare-flood.sh RELIABILITY_TESTS BEFORE_PTYVISORD AFTER_PTYVISORD [KIND...]}")
before=$(realpath "${2:?before daemon}")
after=$(realpath "${3:?after daemon}")
shift 3
kinds=("$@")
[ ${#kinds[@]} -eq 0 ] && kinds=(none hold slowloris garbage connect_close fail_auth all)
status=0
for kind in "${kinds[@]}"; do
    for which in before after; do
        daemon=$before
        [ "$which" = after ] && daemon=$after
        out=$(PTYVISORD_BIN=$daemon PTYVISOR_TEST_SCALE=full "$tests" --gtest_filter="Kinds/Flood.*/$kind" 2>&1)
        rc=$?
        line=$(grep -E '^\[flood' <<<"$out")
        echo "$which ${line:-[flood uid-only] $kind: no figure}"
        if [ $rc -ne 0 ]; then
            status=1
            grep -E 'Failure|FAILED' <<<"$out" | head -5
        fi
    done
done
exit $status
